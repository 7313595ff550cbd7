/* The vocabulary of the EU DSA Transparency Database (TDB) that a checkpoint's configuration may
 * name: the statement categories and the category specifications ("keywords") its statement store
 * request accepts, and the category pgcld uses for a model that names none. The lists follow the
 * TDB's published API documentation (https://transparency.dsa.ec.europa.eu/page/api-documentation)
 * as of 2026; a value the TDB adds later is refused at load until it is added here.
 * Pure functions over static tables: thread-safe, allocate nothing. */
#ifndef PGCL_DSA_VOCABULARY_H
#define PGCL_DSA_VOCABULARY_H

#include <stdbool.h>

#include "model.h"

/* Longest category_specification_other the TDB accepts, in characters. */
#define PGCL_DSA_TEXT_MAX 500

bool pgcl_dsa_is_category(const char *value);      /* one of STATEMENT_CATEGORY_* */
bool pgcl_dsa_is_keyword(const char *value);       /* one of KEYWORD_* (category_specification) */

/* The category of a model whose configuration has no `dsa` object, by its task (documented in
 * docs/checkpoint-format.md): binary and ordinal classifiers are the toxicity shapes (toxic or not,
 * a severity scale) → STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH; a multiclass classifier's
 * labels name different things, so no single category fits them → STATEMENT_CATEGORY_OTHER_VIOLATION_TC. */
const char *pgcl_dsa_default_category(pgcl_task task);

/* The category when the model is not known at all (not loaded): the TDB's catch-all for content
 * incompatible with the terms and conditions. */
#define PGCL_DSA_FALLBACK_CATEGORY "STATEMENT_CATEGORY_OTHER_VIOLATION_TC"

#endif
