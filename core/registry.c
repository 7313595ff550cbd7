/* Model repository scanning and the active-version table; see registry.h. */
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

typedef struct reg_version {
    char *version;
    pgcl_model *model; /* NULL when the load failed */
    char *error;
} reg_version;

typedef struct reg_entry {
    char *name;
    reg_version *versions; /* sorted by version ordering, ascending */
    int n_versions;
    pgcl_model *active;    /* retained; NULL when no version loaded */
} reg_entry;

struct pgcl_registry {
    char *dir;
    pthread_mutex_t lock;
    reg_entry *entries; /* sorted by name */
    int n_entries;
};

bool pgcl_registry_valid_name(const char *name, bool allow_dot) {
    size_t n = strlen(name);
    if (n == 0 || n > 64 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '-' || (allow_dot && ch == '.');
        if (!ok) return false;
    }
    return true;
}

static int cmp_version(const void *a, const void *b) {
    return strverscmp(((const reg_version *)a)->version, ((const reg_version *)b)->version);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const reg_entry *)a)->name, ((const reg_entry *)b)->name);
}

/* Lists the subdirectory names of path that pass pgcl_registry_valid_name; others are logged. */
static char **list_subdirs(const char *path, bool allow_dot, int *count) {
    *count = 0;
    DIR *d = opendir(path);
    if (!d) return NULL;
    char **names = NULL;
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, de->d_name);
        struct stat sb;
        if (stat(full, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (!pgcl_registry_valid_name(de->d_name, allow_dot)) {
            pgcl_log_warn("models: skipping %s: not a valid %s name", full, allow_dot ? "version" : "model");
            continue;
        }
        if (*count == cap) {
            cap = cap ? cap * 2 : 8;
            char **grown = realloc(names, sizeof *names * (size_t)cap);
            if (!grown) break;
            names = grown;
        }
        names[(*count)++] = strdup(de->d_name);
    }
    closedir(d);
    return names;
}

pgcl_status pgcl_registry_create(const char *dir, pgcl_registry **out, char *err, int cap) {
    *out = NULL;
    DIR *probe = opendir(dir);
    if (!probe) {
        pgcl_errorf(err, cap, "%s: cannot read the model repository: %s", dir, strerror(errno));
        return PGCL_ERR_IO;
    }
    closedir(probe);
    pgcl_registry *r = calloc(1, sizeof *r);
    if (!r) return PGCL_ERR_NOMEM;
    pthread_mutex_init(&r->lock, NULL);
    r->dir = strdup(dir);
    int n_models = 0;
    char **models = list_subdirs(dir, false, &n_models);
    r->entries = calloc((size_t)(n_models ? n_models : 1), sizeof *r->entries);
    if (!r->dir || !r->entries) {
        for (int i = 0; i < n_models; i++) free(models[i]);
        free(models);
        pgcl_registry_destroy(r);
        return PGCL_ERR_NOMEM;
    }
    for (int i = 0; i < n_models; i++) {
        reg_entry *e = &r->entries[r->n_entries++];
        e->name = models[i];
        char mdir[4096];
        snprintf(mdir, sizeof mdir, "%s/%s", dir, e->name);
        int n_versions = 0;
        char **versions = list_subdirs(mdir, true, &n_versions);
        e->versions = calloc((size_t)(n_versions ? n_versions : 1), sizeof *e->versions);
        for (int v = 0; v < n_versions && e->versions; v++) {
            reg_version *rv = &e->versions[e->n_versions++];
            rv->version = versions[v];
            char vdir[4400], msg[1024];
            snprintf(vdir, sizeof vdir, "%s/%s", mdir, rv->version);
            pgcl_status st = pgcl_model_load(vdir, e->name, rv->version, &rv->model, msg, sizeof msg);
            if (st != PGCL_OK) {
                rv->error = strdup(msg);
                pgcl_log_error("models: %s/%s failed to load: %s", e->name, rv->version, msg);
            } else {
                pgcl_log_info("models: loaded %s/%s (%s, D=%d d=%d K=%d, sha256 %.12s…, %d golden vectors verified)",
                              e->name, rv->version, pgcl_task_str(rv->model->task), rv->model->D, rv->model->d,
                              rv->model->K, rv->model->sha256, rv->model->n_golden);
            }
        }
        free(versions);
        if (!e->versions) continue;
        qsort(e->versions, (size_t)e->n_versions, sizeof *e->versions, cmp_version);
        for (int v = e->n_versions - 1; v >= 0 && !e->active; v--)
            if (e->versions[v].model) e->active = pgcl_model_retain(e->versions[v].model);
        if (e->active) pgcl_log_info("models: %s serves version %s", e->name, e->active->version);
        else pgcl_log_warn("models: %s has no loadable version", e->name);
    }
    free(models);
    qsort(r->entries, (size_t)r->n_entries, sizeof *r->entries, cmp_entry);
    *out = r;
    return PGCL_OK;
}

void pgcl_registry_destroy(pgcl_registry *r) {
    if (!r) return;
    for (int i = 0; i < r->n_entries; i++) {
        reg_entry *e = &r->entries[i];
        pgcl_model_release(e->active);
        for (int v = 0; v < e->n_versions; v++) {
            free(e->versions[v].version);
            pgcl_model_release(e->versions[v].model);
            free(e->versions[v].error);
        }
        free(e->versions);
        free(e->name);
    }
    free(r->entries);
    free(r->dir);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static reg_entry *find_entry(pgcl_registry *r, const char *name) {
    reg_entry key = {.name = (char *)name};
    return bsearch(&key, r->entries, (size_t)r->n_entries, sizeof *r->entries, cmp_entry);
}

pgcl_model *pgcl_registry_acquire(pgcl_registry *r, const char *name) {
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, name);
    pgcl_model *m = e && e->active ? pgcl_model_retain(e->active) : NULL;
    pthread_mutex_unlock(&r->lock);
    return m;
}

bool pgcl_registry_knows(pgcl_registry *r, const char *name) {
    pthread_mutex_lock(&r->lock);
    bool known = find_entry(r, name) != NULL;
    pthread_mutex_unlock(&r->lock);
    return known;
}

int pgcl_registry_ready_count(pgcl_registry *r) {
    pthread_mutex_lock(&r->lock);
    int n = 0;
    for (int i = 0; i < r->n_entries; i++) n += r->entries[i].active != NULL;
    pthread_mutex_unlock(&r->lock);
    return n;
}

void pgcl_registry_max_dims(pgcl_registry *r, int *n_first, int *max_hidden) {
    *n_first = 1;
    *max_hidden = 1;
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->n_entries; i++) {
        for (int v = 0; v < r->entries[i].n_versions; v++) {
            const pgcl_model *m = r->entries[i].versions[v].model;
            if (!m) continue;
            if (m->fast.n_first > *n_first) *n_first = m->fast.n_first;
            if (m->max_hidden > *max_hidden) *max_hidden = m->max_hidden;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

static json_t *describe_version(const reg_version *rv) {
    json_t *o = json_object();
    json_object_set_new(o, "version", json_string(rv->version));
    if (!rv->model) {
        json_object_set_new(o, "state", json_string("failed"));
        json_object_set_new(o, "error", json_string(rv->error ? rv->error : "unknown error"));
        return o;
    }
    const pgcl_model *m = rv->model;
    json_object_set_new(o, "state", json_string("ready"));
    json_object_set_new(o, "sha256", json_string(m->sha256));
    json_object_set_new(o, "task", json_string(pgcl_task_str(m->task)));
    json_t *labels = json_array();
    for (int k = 0; k < m->K; k++) json_array_append_new(labels, json_string(m->labels[k]));
    json_object_set_new(o, "labels", labels);
    json_object_set_new(o, "dims", json_pack("{s:i, s:i, s:i}", "D", m->D, "d", m->d, "K", m->K));
    json_object_set(o, "policy", m->policy_json);
    if (m->training) json_object_set(o, "training", m->training);
    return o;
}

json_t *pgcl_registry_describe(pgcl_registry *r) {
    json_t *list = json_array();
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->n_entries; i++) {
        const reg_entry *e = &r->entries[i];
        json_t *versions = json_array();
        for (int v = 0; v < e->n_versions; v++) json_array_append_new(versions, describe_version(&e->versions[v]));
        json_array_append_new(list, json_pack("{s:s, s:o, s:o}", "name", e->name, "active_version",
                                              e->active ? json_string(e->active->version) : json_null(),
                                              "versions", versions));
    }
    pthread_mutex_unlock(&r->lock);
    return json_pack("{s:o}", "models", list);
}
