/* Model repository, active and shadow versions, activation; see registry.h. */
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

typedef enum { V_AVAILABLE, V_LOADING, V_READY, V_FAILED, V_RETIRED } version_state;

static const char *const g_state_names[] = {"available", "loading", "ready", "failed", "retired"};

typedef struct reg_version {
    char *version;
    version_state state;
    char *error;        /* V_FAILED: why */
    char sha256[65];    /* once loaded */
} reg_version;

typedef struct reg_entry {
    char *name;
    reg_version *versions; /* grows as versions appear on disk; not sorted */
    int n_versions, cap_versions;
    pgcl_model *active;    /* retained; NULL when none */
    pgcl_model *shadow;    /* retained; NULL when none */
    bool changing;         /* an administrative change is in progress */
} reg_entry;

struct pgcl_registry {
    char *dir;
    char real_dir[PATH_MAX]; /* realpath of dir: version directories must resolve inside it */
    pthread_mutex_t lock;
    reg_entry **entries;   /* sorted by name; entries are never removed */
    int n_entries, cap_entries;
};

bool pgcl_registry_valid_name(const char *name, bool allow_dot) {
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.') return false; /* no ".", "..", hidden or temporary names */
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '-' || (allow_dot && ch == '.');
        if (!ok) return false;
    }
    return true;
}

const char *pgcl_registry_dir(const pgcl_registry *r) { return r->dir; }

/* DIR/<model>/<version> must be a directory whose real path lies inside the repository (no
 * symbolic link leads out of it). Returns 0 and the path, or -1 with err set. */
static int version_path(const pgcl_registry *r, const char *name, const char *version, char *out, size_t cap,
                        char *err, int ecap) {
    snprintf(out, cap, "%s/%s/%s", r->dir, name, version);
    char real[PATH_MAX];
    struct stat sb;
    if (!realpath(out, real) || stat(real, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        pgcl_errorf(err, ecap, "version %s/%s does not exist in the model repository", name, version);
        return -1;
    }
    size_t n = strlen(r->real_dir);
    if (strncmp(real, r->real_dir, n) != 0 || real[n] != '/') {
        pgcl_errorf(err, ecap, "%s resolves outside the model repository", out);
        return -1;
    }
    return 0;
}

static int cmp_entry_ptr(const void *a, const void *b) {
    return strcmp((*(reg_entry *const *)a)->name, (*(reg_entry *const *)b)->name);
}

static reg_entry *find_entry(pgcl_registry *r, const char *name) {
    if (r->n_entries == 0) return NULL;
    reg_entry key = {.name = (char *)name}, *pkey = &key;
    reg_entry **hit = bsearch(&pkey, r->entries, (size_t)r->n_entries, sizeof *r->entries, cmp_entry_ptr);
    return hit ? *hit : NULL;
}

static reg_version *find_version(reg_entry *e, const char *version) {
    for (int i = 0; i < e->n_versions; i++)
        if (strcmp(e->versions[i].version, version) == 0) return &e->versions[i];
    return NULL;
}

/* Adds entries/versions for what is on disk now. Caller holds r->lock. */
static void rescan(pgcl_registry *r) {
    DIR *d = opendir(r->dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!pgcl_registry_valid_name(de->d_name, false)) continue;
        char mdir[PATH_MAX];
        snprintf(mdir, sizeof mdir, "%s/%s", r->dir, de->d_name);
        struct stat sb;
        if (stat(mdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        reg_entry *e = find_entry(r, de->d_name);
        if (!e) {
            if (r->n_entries == r->cap_entries) {
                int cap = r->cap_entries ? 2 * r->cap_entries : 8;
                reg_entry **grown = realloc(r->entries, sizeof *grown * (size_t)cap);
                if (!grown) break;
                r->entries = grown;
                r->cap_entries = cap;
            }
            e = calloc(1, sizeof *e);
            if (!e || !(e->name = strdup(de->d_name))) {
                free(e);
                break;
            }
            r->entries[r->n_entries++] = e;
            qsort(r->entries, (size_t)r->n_entries, sizeof *r->entries, cmp_entry_ptr);
        }
        DIR *vd = opendir(mdir);
        if (!vd) continue;
        struct dirent *ve;
        while ((ve = readdir(vd))) {
            if (!pgcl_registry_valid_name(ve->d_name, true) || ve->d_name[0] == '.') continue;
            char vdir[PATH_MAX + 300];
            snprintf(vdir, sizeof vdir, "%s/%s", mdir, ve->d_name);
            if (stat(vdir, &sb) != 0 || !S_ISDIR(sb.st_mode) || find_version(e, ve->d_name)) continue;
            if (e->n_versions == e->cap_versions) {
                int cap = e->cap_versions ? 2 * e->cap_versions : 4;
                reg_version *grown = realloc(e->versions, sizeof *grown * (size_t)cap);
                if (!grown) break;
                e->versions = grown;
                e->cap_versions = cap;
            }
            e->versions[e->n_versions++] = (reg_version){.version = strdup(ve->d_name), .state = V_AVAILABLE};
        }
        closedir(vd);
    }
    closedir(d);
}

static int cmp_version_desc(const void *a, const void *b) {
    return -strverscmp(*(const char *const *)a, *(const char *const *)b);
}

/* Loads one version without the registry lock held; records the outcome under it. */
static pgcl_status load_unlocked(pgcl_registry *r, reg_entry *e, const char *version, pgcl_model **out, char *err,
                                 int cap) {
    char path[PATH_MAX + 160];
    pthread_mutex_lock(&r->lock);
    reg_version *v = find_version(e, version);
    if (!v) {
        rescan(r);
        v = find_version(e, version);
    }
    if (v) v->state = V_LOADING;
    pthread_mutex_unlock(&r->lock);
    if (!v) {
        pgcl_errorf(err, cap, "version %s/%s does not exist in the model repository", e->name, version);
        return PGCL_ERR_NOT_FOUND;
    }
    pgcl_status st = PGCL_ERR_INVALID;
    if (version_path(r, e->name, version, path, sizeof path, err, cap) == 0)
        st = pgcl_model_load(path, e->name, version, out, err, cap);
    pthread_mutex_lock(&r->lock);
    v = find_version(e, version); /* the array may have grown meanwhile */
    free(v->error);
    v->error = NULL;
    if (st == PGCL_OK) {
        v->state = V_READY;
        memcpy(v->sha256, (*out)->sha256, sizeof v->sha256);
    } else {
        v->state = V_FAILED;
        v->error = strdup(err);
    }
    pthread_mutex_unlock(&r->lock);
    if (st == PGCL_OK)
        pgcl_log_info("models: loaded %s/%s (%s, D=%d d=%d K=%d, sha256 %.12s…, %d golden vectors verified)", e->name,
                      version, pgcl_task_str((*out)->task), (*out)->D, (*out)->d, (*out)->K, (*out)->sha256,
                      (*out)->n_golden);
    else
        pgcl_log_error("models: %s/%s failed to load: %s", e->name, version, err);
    return st;
}

pgcl_status pgcl_registry_create(const char *dir, pgcl_registry **out, char *err, int cap) {
    *out = NULL;
    pgcl_registry *r = calloc(1, sizeof *r);
    if (!r) return PGCL_ERR_NOMEM;
    pthread_mutex_init(&r->lock, NULL);
    r->dir = strdup(dir);
    if (!r->dir || !realpath(dir, r->real_dir)) {
        pgcl_errorf(err, cap, "%s: cannot read the model repository: %s", dir, strerror(errno));
        pgcl_registry_destroy(r);
        return PGCL_ERR_IO;
    }
    pthread_mutex_lock(&r->lock);
    rescan(r);
    pthread_mutex_unlock(&r->lock);
    *out = r;
    return PGCL_OK;
}

void pgcl_registry_load_initial(pgcl_registry *r, json_t *preferred) {
    pthread_mutex_lock(&r->lock);
    int n_entries = r->n_entries;
    reg_entry **entries = malloc(sizeof *entries * (size_t)(n_entries ? n_entries : 1));
    if (entries && n_entries) memcpy(entries, r->entries, sizeof *entries * (size_t)n_entries); /* entries: NULL when none */
    pthread_mutex_unlock(&r->lock);
    if (!entries) return;
    for (int i = 0; i < n_entries; i++) {
        reg_entry *e = entries[i];
        if (e->active) continue;
        /* Try the preferred version first, then the others from the highest down. */
        const char **order = calloc((size_t)e->n_versions + 1, sizeof *order);
        if (!order) continue;
        int n = 0;
        json_t *pref = preferred ? json_object_get(preferred, e->name) : NULL;
        const char *pv = json_is_string(pref) ? json_string_value(pref) : NULL;
        for (int v = 0; v < e->n_versions; v++)
            if (!pv || strcmp(e->versions[v].version, pv) != 0) order[n++] = e->versions[v].version;
        qsort(order, (size_t)n, sizeof *order, cmp_version_desc);
        if (pv && find_version(e, pv)) {
            memmove(order + 1, order, sizeof *order * (size_t)n);
            order[0] = pv;
            n++;
        } else if (pv) {
            pgcl_log_warn("models: %s: last activated version %s is no longer on disk", e->name, pv);
        }
        pgcl_model *loaded = NULL;
        for (int k = 0; k < n && !loaded; k++) {
            char msg[1024];
            if (load_unlocked(r, e, order[k], &loaded, msg, sizeof msg) != PGCL_OK) loaded = NULL;
            if (k == 0 && pv && !loaded) pgcl_log_warn("models: %s: falling back from version %s", e->name, pv);
        }
        free(order);
        if (loaded) {
            pgcl_model *previous = NULL;
            pgcl_registry_set_active(r, loaded, &previous);
            pgcl_model_release(previous);
            pgcl_model_release(loaded);
            pgcl_log_info("models: %s serves version %s", e->name, e->active->version);
        } else {
            pgcl_log_warn("models: %s has no loadable version", e->name);
        }
    }
    free(entries);
}

void pgcl_registry_destroy(pgcl_registry *r) {
    if (!r) return;
    for (int i = 0; i < r->n_entries; i++) {
        reg_entry *e = r->entries[i];
        pgcl_model_release(e->active);
        pgcl_model_release(e->shadow);
        for (int v = 0; v < e->n_versions; v++) {
            free(e->versions[v].version);
            free(e->versions[v].error);
        }
        free(e->versions);
        free(e->name);
        free(e);
    }
    free(r->entries);
    free(r->dir);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

pgcl_model *pgcl_registry_acquire(pgcl_registry *r, const char *name, pgcl_model **shadow) {
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, name);
    pgcl_model *m = e && e->active ? pgcl_model_retain(e->active) : NULL;
    if (shadow) *shadow = m && e->shadow ? pgcl_model_retain(e->shadow) : NULL;
    pthread_mutex_unlock(&r->lock);
    return m;
}

bool pgcl_registry_knows(pgcl_registry *r, const char *name) {
    pthread_mutex_lock(&r->lock);
    bool known = find_entry(r, name) != NULL;
    pthread_mutex_unlock(&r->lock);
    return known;
}

bool pgcl_registry_knows_version(pgcl_registry *r, const char *name, const char *version) {
    if (!pgcl_registry_valid_name(name, false) || !pgcl_registry_valid_name(version, true)) return false;
    char path[PATH_MAX + 200], err[256];
    return version_path(r, name, version, path, sizeof path, err, sizeof err) == 0;
}

int pgcl_registry_ready_count(pgcl_registry *r) {
    pthread_mutex_lock(&r->lock);
    int n = 0;
    for (int i = 0; i < r->n_entries; i++) n += r->entries[i]->active != NULL;
    pthread_mutex_unlock(&r->lock);
    return n;
}

pgcl_status pgcl_registry_begin_change(pgcl_registry *r, const char *name, char *err, int cap) {
    if (!pgcl_registry_valid_name(name, false)) {
        pgcl_errorf(err, cap, "'%.80s' is not a valid model name", name);
        return PGCL_ERR_INVALID;
    }
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, name);
    if (!e) {
        rescan(r);
        e = find_entry(r, name);
    }
    pgcl_status st = PGCL_OK;
    if (!e) {
        pgcl_errorf(err, cap, "no model named '%s' in the model repository", name);
        st = PGCL_ERR_NOT_FOUND;
    } else if (e->changing) {
        pgcl_errorf(err, cap, "another change of model '%s' is in progress", name);
        st = PGCL_ERR_BUSY;
    } else {
        e->changing = true;
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

void pgcl_registry_end_change(pgcl_registry *r, const char *name) {
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, name);
    if (e) e->changing = false;
    pthread_mutex_unlock(&r->lock);
}

pgcl_status pgcl_registry_load_version(pgcl_registry *r, const char *name, const char *version, pgcl_model **out,
                                       char *err, int cap) {
    *out = NULL;
    if (!pgcl_registry_valid_name(version, true)) {
        pgcl_errorf(err, cap, "'%.80s' is not a valid version name", version);
        return PGCL_ERR_INVALID;
    }
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, name);
    pgcl_model *loaded = NULL;
    if (e && e->active && strcmp(e->active->version, version) == 0) loaded = pgcl_model_retain(e->active);
    else if (e && e->shadow && strcmp(e->shadow->version, version) == 0) loaded = pgcl_model_retain(e->shadow);
    pthread_mutex_unlock(&r->lock);
    if (!e) {
        pgcl_errorf(err, cap, "no model named '%s'", name);
        return PGCL_ERR_INVALID;
    }
    if (loaded) {
        *out = loaded;
        return PGCL_OK;
    }
    return load_unlocked(r, e, version, out, err, cap);
}

pgcl_status pgcl_registry_read_version(const pgcl_registry *r, const char *name, const char *version, pgcl_model **out,
                                       char *err, int cap) {
    *out = NULL;
    if (!pgcl_registry_valid_name(name, false) || !pgcl_registry_valid_name(version, true)) {
        pgcl_errorf(err, cap, "'%.80s/%.80s' is not a valid model and version name", name, version);
        return PGCL_ERR_INVALID;
    }
    char dir[PATH_MAX];
    if (version_path(r, name, version, dir, sizeof dir, err, cap) != 0) return PGCL_ERR_NOT_FOUND;
    return pgcl_model_load(dir, name, version, out, err, cap);
}

void pgcl_registry_set_active(pgcl_registry *r, pgcl_model *m, pgcl_model **previous) {
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, m->name);
    *previous = e->active;
    e->active = pgcl_model_retain(m);
    if (*previous && *previous != m) {
        reg_version *v = find_version(e, (*previous)->version);
        bool still_shadow = e->shadow && e->shadow == *previous;
        if (v && !still_shadow) v->state = V_RETIRED;
    }
    reg_version *nv = find_version(e, m->version);
    if (nv) nv->state = V_READY;
    pthread_mutex_unlock(&r->lock);
}

void pgcl_registry_set_shadow(pgcl_registry *r, const char *name, pgcl_model *m, pgcl_model **previous) {
    pthread_mutex_lock(&r->lock);
    reg_entry *e = find_entry(r, name);
    *previous = e->shadow;
    e->shadow = m ? pgcl_model_retain(m) : NULL;
    if (*previous && *previous != m && *previous != e->active) {
        reg_version *v = find_version(e, (*previous)->version);
        if (v) v->state = V_RETIRED;
    }
    pthread_mutex_unlock(&r->lock);
}

static json_t *describe_version(const reg_entry *e, const reg_version *v) {
    json_t *o = json_pack("{s:s, s:s}", "version", v->version, "state", g_state_names[v->state]);
    if (v->state == V_FAILED) json_object_set_new(o, "error", json_string(v->error ? v->error : "unknown error"));
    if (v->sha256[0]) json_object_set_new(o, "sha256", json_string(v->sha256));
    const pgcl_model *m = NULL;
    if (e->active && strcmp(e->active->version, v->version) == 0) {
        m = e->active;
        json_object_set_new(o, "role", json_string("active"));
    } else if (e->shadow && strcmp(e->shadow->version, v->version) == 0) {
        m = e->shadow;
        json_object_set_new(o, "role", json_string("shadow"));
    }
    if (!m) return o;
    json_object_set_new(o, "task", json_string(pgcl_task_str(m->task)));
    json_t *labels = json_array();
    for (int k = 0; k < m->K; k++) json_array_append_new(labels, json_string(m->labels[k]));
    json_object_set_new(o, "labels", labels);
    json_object_set_new(o, "dims", json_pack("{s:i, s:i, s:i}", "D", m->D, "d", m->d, "K", m->K));
    json_object_set(o, "policy", m->policy_json);
    if (m->training) json_object_set(o, "training", m->training);
    if (m->calibration) json_object_set(o, "calibration", m->calibration);
    /* the DSA vocabulary the version's statements of reasons use: its `dsa` object as written, or the
     * task's default category; category_source says which */
    json_t *dsa = pgcl_model_dsa_json(m, "category_source");
    if (dsa) json_object_set_new(o, "dsa", dsa);
    return o;
}

static int cmp_version_asc(const void *a, const void *b) {
    return strverscmp(((const reg_version *)a)->version, ((const reg_version *)b)->version);
}

json_t *pgcl_registry_describe(pgcl_registry *r) {
    json_t *list = json_array();
    pthread_mutex_lock(&r->lock);
    rescan(r);
    for (int i = 0; i < r->n_entries; i++) {
        reg_entry *e = r->entries[i];
        if (e->n_versions > 1) qsort(e->versions, (size_t)e->n_versions, sizeof *e->versions, cmp_version_asc);
        json_t *versions = json_array();
        for (int v = 0; v < e->n_versions; v++) json_array_append_new(versions, describe_version(e, &e->versions[v]));
        json_array_append_new(list, json_pack("{s:s, s:o, s:o, s:o}", "name", e->name, "active_version",
                                              e->active ? json_string(e->active->version) : json_null(),
                                              "shadow_version", e->shadow ? json_string(e->shadow->version) : json_null(),
                                              "versions", versions));
    }
    pthread_mutex_unlock(&r->lock);
    return json_pack("{s:o}", "models", list);
}

void pgcl_registry_foreach_active(pgcl_registry *r, void (*fn)(const pgcl_model *m, void *ctx), void *ctx) {
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->n_entries; i++)
        if (r->entries[i]->active) fn(r->entries[i]->active, ctx);
    pthread_mutex_unlock(&r->lock);
}
