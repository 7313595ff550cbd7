/* Per-item facts of a scoring request for a DSA statement of reasons (item_facts.h). */
#include "item_facts.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The EEA as the DSA Transparency Database lists it (EuropeanCountriesService: the EU's 27 with
 * Greece as "GR", then Iceland, Liechtenstein and Norway). */
static const char EEA_CODES[] = "AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IS IT LI LT LU LV MT NL NO PL PT RO SE SI SK";

/* ISO 639-1's two-letter codes, uppercase. */
static const char ISO639_1_CODES[] =
    "AA AB AE AF AK AM AN AR AS AV AY AZ BA BE BG BI BM BN BO BR BS CA CE CH CO CR CS CU CV CY DA DE DV DZ EE EL EN EO "
    "ES ET EU FA FF FI FJ FO FR FY GA GD GL GN GU GV HA HE HI HO HR HT HU HY HZ IA ID IE IG II IK IO IS IT IU JA JV KA "
    "KG KI KJ KK KL KM KN KO KR KS KU KV KW KY LA LB LG LI LN LO LT LU LV MG MH MI MK ML MN MR MS MT MY NA NB ND NE NG "
    "NL NN NO NR NV NY OC OJ OM OR OS PA PI PL PS PT QU RM RN RO RU RW SA SC SD SE SG SI SK SL SM SN SO SQ SR SS ST SU "
    "SV SW TA TE TG TH TI TK TL TN TO TR TS TT TW TY UG UK UR UZ VE VI VO WA WO XH YI YO ZA ZH ZU";

/* Whether code is two uppercase letters listed in the space-separated list. */
static bool listed(const char *list, const char *code) {
    if (strlen(code) != 2 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z') return false;
    for (const char *p = list; *p; p += p[2] ? 3 : 2)
        if (p[0] == code[0] && p[1] == code[1]) return true;
    return false;
}

bool pgcld_eea_country(const char *code) { return listed(EEA_CODES, code); }

bool pgcld_iso639_1_upper(const char *code) { return listed(ISO639_1_CODES, code); }

bool pgcld_item_fact_member(const char *name) {
    return strcmp(name, "content_date") == 0 || strcmp(name, "territorial_scope") == 0 ||
           strcmp(name, "content_language") == 0;
}

static bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int y, int m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* YYYYMMDD of the day after ymd. */
static long next_day(long ymd) {
    int y = (int)(ymd / 10000), m = (int)(ymd / 100 % 100), d = (int)(ymd % 100);
    if (++d > days_in_month(y, m)) {
        d = 1;
        if (++m > 12) {
            m = 1;
            y++;
        }
    }
    return (long)y * 10000 + m * 100 + d;
}

bool pgcld_content_date_valid(const char *text, long today_ymd) {
    if (strlen(text) != 10 || text[4] != '-' || text[7] != '-') return false;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (text[i] < '0' || text[i] > '9')) return false;
    int y = (text[0] - '0') * 1000 + (text[1] - '0') * 100 + (text[2] - '0') * 10 + (text[3] - '0');
    int m = (text[5] - '0') * 10 + (text[6] - '0'), d = (text[8] - '0') * 10 + (text[9] - '0');
    if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) return false;
    long ymd = (long)y * 10000 + m * 100 + d;
    return ymd >= 20000101 && ymd <= next_day(today_ymd);
}

long pgcld_today_ymd(void) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    return (long)(tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday;
}

/* territorial_scope: a non-empty array of unique EEA codes, written canonically into buf. */
static bool scope_valid(json_t *v, char *buf, char *why, size_t why_cap) {
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0) {
        snprintf(why, why_cap, "must be a non-empty array of EEA country codes");
        return false;
    }
    size_t off = 0;
    buf[off++] = '[';
    for (size_t k = 0; k < n; k++) {
        json_t *c = json_array_get(v, k);
        const char *code = json_is_string(c) ? json_string_value(c) : "";
        if (!pgcld_eea_country(code)) {
            snprintf(why, why_cap, "[%zu] is not an EEA country's ISO 3166-1 alpha-2 code in uppercase (e.g. \"DE\"; "
                     "Greece is \"GR\")", k);
            return false;
        }
        for (size_t j = 0; j < k; j++) {
            if (strcmp(json_string_value(json_array_get(v, j)), code) == 0) {
                snprintf(why, why_cap, "[%zu] repeats \"%s\"", k, code);
                return false;
            }
        }
        /* at most 30 unique codes fit: the check above bounds n by the list's size */
        off += (size_t)snprintf(buf + off, PGCLD_TERRITORIAL_SCOPE_MAX + 1 - off, "%s\"%s\"", k ? "," : "", code);
    }
    buf[off++] = ']';
    buf[off] = 0;
    return true;
}

bool pgcld_item_fact_json_of(json_t *item, pgcld_item_fact_json *out) {
    out->content_date = json_object_get(item, "content_date");
    out->territorial_scope = json_object_get(item, "territorial_scope");
    out->content_language = json_object_get(item, "content_language");
    return out->content_date || out->territorial_scope || out->content_language;
}

int pgcld_item_facts_parse(const pgcld_item_fact_json *item, int i, long today_ymd, pgcl_item_facts *out,
                           char *scope_buf, pgcld_reply *reply) {
    *out = (pgcl_item_facts){0};
    char field[64], why[160]; /* field: formatted only for a refusal */
    json_t *date = item->content_date;
    if (date) {
        if (!json_is_string(date) || !pgcld_content_date_valid(json_string_value(date), today_ymd)) {
            snprintf(field, sizeof field, "items[%d].content_date", i);
            pgcld_reply_error(reply, 400, "invalid_content_date", i, field,
                              "item %d: 'content_date' must be a date \"YYYY-MM-DD\" from 2000-01-01 to tomorrow (UTC)",
                              i);
            return -1;
        }
        out->content_date = json_string_value(date);
    }
    json_t *scope = item->territorial_scope;
    if (scope) {
        if (!scope_valid(scope, scope_buf, why, sizeof why)) {
            snprintf(field, sizeof field, "items[%d].territorial_scope", i);
            pgcld_reply_error(reply, 400, "invalid_territorial_scope", i, field, "item %d: 'territorial_scope' %s", i,
                              why);
            return -1;
        }
        out->territorial_scope = scope_buf;
    }
    json_t *lang = item->content_language;
    if (lang) {
        if (!json_is_string(lang) || !pgcld_iso639_1_upper(json_string_value(lang))) {
            snprintf(field, sizeof field, "items[%d].content_language", i);
            pgcld_reply_error(reply, 400, "invalid_content_language", i, field,
                              "item %d: 'content_language' must be an ISO 639-1 code in uppercase (e.g. \"EN\")", i);
            return -1;
        }
        out->content_language = json_string_value(lang);
    }
    return 0;
}
