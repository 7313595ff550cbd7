/* The per-item facts a scoring request may give for a DSA statement of reasons (issue 19, item 9),
 * stored with each decision (migration 0011) and read back by the decision reads:
 *   content_date       "YYYY-MM-DD": a real calendar date, from 2000-01-01 (the DSA Transparency
 *                      Database's lower bound) to tomorrow (UTC; a clock a day ahead is tolerated);
 *   territorial_scope  an array of unique ISO 3166-1 alpha-2 codes of EEA countries, uppercase, as
 *                      the Transparency Database spells them (Greece is "GR");
 *   content_language   an ISO 639-1 code, uppercase as the Transparency Database wants it ("EN").
 * Each is optional. A bad value is refused whole (400, a stable code per field, the item index). */
#ifndef PGCLD_ITEM_FACTS_H
#define PGCLD_ITEM_FACTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "score.h"
#include "server.h"

/* The longest territorial_scope text: all 30 EEA codes, each "\"XX\"," plus the brackets. */
#define PGCLD_TERRITORIAL_SCOPE_MAX (30 * 5 + 2)

/* Whether `name` is one of the three fact members of an item. */
bool pgcld_item_fact_member(const char *name);

/* Whether text is "YYYY-MM-DD", a real date between 2000-01-01 and the UTC day after today_ymd
 * (today as YYYYMMDD, e.g. 20261126). */
bool pgcld_content_date_valid(const char *text, long today_ymd);

/* Whether code is an EEA country's ISO 3166-1 alpha-2 code as the Transparency Database spells it. */
bool pgcld_eea_country(const char *code);

/* Whether code is an ISO 639-1 language code in uppercase. */
bool pgcld_iso639_1_upper(const char *code);

/* The three fact members of one item (NULL where absent), looked up once. */
typedef struct pgcld_item_fact_json {
    json_t *content_date, *territorial_scope, *content_language;
} pgcld_item_fact_json;

/* item's fact members; returns whether it has any. */
bool pgcld_item_fact_json_of(json_t *item, pgcld_item_fact_json *out);

/* Reads item i's facts (its members, from pgcld_item_fact_json_of) into *out: strings borrowed
 * from the item, territorial_scope written canonically (["DE","FR"], the codes in the order given)
 * into scope_buf
 * (PGCLD_TERRITORIAL_SCOPE_MAX + 1 bytes). today_ymd as for pgcld_content_date_valid. Returns 0, or
 * -1 with reply set (400: invalid_content_date, invalid_territorial_scope, invalid_content_language;
 * the field named as items[i].name). */
int pgcld_item_facts_parse(const pgcld_item_fact_json *item, int i, long today_ymd, pgcl_item_facts *out,
                           char *scope_buf, pgcld_reply *reply);

/* Today's UTC date as YYYYMMDD. */
long pgcld_today_ymd(void);

#endif
