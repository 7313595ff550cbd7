// Transparency figures (GET /v1/audit/stats): decisions by outcome, label and model version;
// contests filed, resolved and open, the median time to resolution and the overturn rate by
// model version, as charts. The per-version contest charts (contests filed, median time to
// resolution) are counted from the contest queue (GET /v1/contests, reviewers only) over the
// same window, since the figures give those two numbers for all versions together.
import {api} from './api.js';
import {hbars} from './charts.js';
import {el, field, fmtDuration, replace} from './dom.js';

const QUEUE_PAGE = 1000; // the API's largest page
const QUEUE_MAX_PAGES = 20; // per status: the charts say when they cover only part of the queue

function stat(k, v, id) {
  return el('div', {class: 'stat', id}, el('span', {class: 'k'}, k), el('span', {class: 'v'}, v));
}

/** A round axis for values up to top: {max, ticks} with at most five steps of 1, 2, 2.5 or 5 × 10^k
 * (whole steps only when integer). */
function niceAxis(top, integer) {
  top = Math.max(integer ? 1 : 1e-9, top);
  for (let p = 10 ** Math.floor(Math.log10(top / 5)); ; p *= 10) {
    for (const m of integer && p < 10 ? [1, 2, 5] : [1, 2, 2.5, 5]) {
      const step = m * p;
      if ((integer && step < 1) || top / step > 5) continue;
      const ticks = Math.max(1, Math.ceil(top / step - 1e-9));
      return {max: ticks * step, ticks};
    }
  }
}

/** Axis options for counts: whole-number ticks, at most five steps. */
function countAxis(items) {
  return niceAxis(Math.max(...items.map((i) => i.value)), true);
}

/** Axis options for durations in seconds: round ticks in s, min, h or d, whichever suits the longest. */
function durationAxis(items) {
  const top = Math.max(...items.map((i) => i.value));
  const [unit, per] = top < 120 ? ['s', 1] : top < 7200 ? ['min', 60] : top < 172800 ? ['h', 3600] : ['d', 86400];
  const axis = niceAxis(top / per || 1, false);
  return {max: axis.max * per, ticks: axis.ticks, tickFormat: (v) => `${Number((v / per).toPrecision(6))} ${unit}`};
}

/** Milliseconds since the epoch of an API timestamp (microseconds cut to milliseconds). */
function ms(t) {
  return Date.parse(String(t).replace(/(\.\d{3})\d*Z$/, '$1Z'));
}

function median(sorted) {
  if (!sorted.length) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Contests filed in [since, until) (the API's echoed bounds, same format as filed_at, so they
 * compare as text) by "model vVERSION": {filed, resolved, medianSeconds}, and whether the whole
 * queue was read. Open contests are read first, then resolved ones, keyed by contest id, so a
 * contest resolved meanwhile counts once, as resolved. */
async function queueByVersion(since, until) {
  const byId = new Map();
  let complete = true;
  for (const status of ['open', 'resolved']) {
    let cursor = null, pages = 0;
    do {
      const page = await api('GET', '/v1/contests', {query: {status, limit: QUEUE_PAGE, cursor}});
      for (const c of page.contests) {
        if ((since && c.filed_at < since) || (until && c.filed_at >= until)) continue;
        byId.set(c.contest_id, c);
      }
      cursor = page.next_cursor;
      pages += 1;
    } while (cursor && pages < QUEUE_MAX_PAGES);
    if (cursor) complete = false;
  }
  const acc = new Map();
  for (const c of byId.values()) {
    const key = `${c.model_name} v${c.model_version}`;
    if (!acc.has(key)) acc.set(key, {filed: 0, resolved: 0, seconds: []});
    const a = acc.get(key);
    a.filed += 1;
    if (c.resolution) {
      a.resolved += 1;
      a.seconds.push(Math.max(0, (ms(c.resolution.resolved_at) - ms(c.filed_at)) / 1000));
    }
  }
  const out = new Map();
  for (const [key, a] of acc) {
    out.set(key, {filed: a.filed, resolved: a.resolved, medianSeconds: median(a.seconds.sort((x, y) => x - y))});
  }
  return {byVersion: out, complete, total: byId.size};
}

/** The two per-version contest charts (cards), or a card saying why they are not shown. */
async function contestCharts(s) {
  const c = s.contests;
  let q;
  try {
    q = await queueByVersion(s.since, s.until);
  } catch (e) {
    const why = e.status === 403 ? 'They are counted from the contest queue, which only a reviewer key may read.'
      : `The contest queue could not be read (${e.code || 'error'}: ${e.message}).`;
    return [el('section', {class: 'card', id: 'contests-by-version'}, el('h2', {}, 'Contests by model version'),
      el('p', {class: 'muted'}, why))];
  }
  // versions in the figures' order, then any the queue has beyond them (filed since the figures were read)
  const keys = c.overturn_rate_by_model_version.map((r) => `${r.model_name} v${r.model_version}`);
  for (const k of [...q.byVersion.keys()].sort()) if (!keys.includes(k)) keys.push(k);
  const none = {filed: 0, resolved: 0, medianSeconds: null};
  const filed = keys.map((k) => {
    const v = q.byVersion.get(k) || none;
    return {label: k, value: v.filed, text: `${v.filed} (${v.resolved} resolved, ${v.filed - v.resolved} open)`};
  });
  const medians = keys.map((k) => {
    const v = q.byVersion.get(k) || none;
    return v.medianSeconds === null ? {label: k, value: 0, cls: 'bar-muted', text: 'none resolved'}
      : {label: k, value: v.medianSeconds, text: fmtDuration(v.medianSeconds)};
  });
  const notes = [];
  if (!q.complete) {
    notes.push(el('p', {class: 'muted'}, `These cover the first ${q.total} contests of the queue only.`));
  } else if (q.total !== c.filed) {
    notes.push(el('p', {class: 'muted'}, `The queue changed while the figures were read (${q.total} contests here, ` +
      `${c.filed} above); show the figures again for a consistent view.`));
  }
  const empty = () => el('p', {class: 'muted'}, 'None in this window.');
  return [
    el('section', {class: 'card', id: 'contests-by-version'}, el('h2', {}, 'Contests filed by model version'),
      keys.length ? hbars(filed, {title: 'Contests filed by model version', labelWidth: 140, valueWidth: 170,
        ...countAxis(filed)}) : empty(),
      notes),
    el('section', {class: 'card', id: 'median-by-version'}, el('h2', {}, 'Median time to resolution by model version'),
      keys.length ? hbars(medians, {title: 'Median time to resolution by model version', labelWidth: 140,
        ...durationAxis(medians)}) : empty(),
      notes.map((n) => n.cloneNode(true))),
  ];
}

/** Renders the figures for the window in ?since=&until= (all time when absent). */
export async function render(main, ctx) {
  const since = el('input', {type: 'text', name: 'since', placeholder: '2026-11-01T00:00:00Z', value: ctx.query.get('since') || ''});
  const until = el('input', {type: 'text', name: 'until', placeholder: '2026-12-01T00:00:00Z', value: ctx.query.get('until') || ''});
  const form = el('form', {class: 'filters', 'aria-label': 'Time window'}, field('Since (RFC 3339)', since),
    field('Until (RFC 3339)', until), el('div', {}, el('button', {type: 'submit'}, 'Show')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const qs = new URLSearchParams();
    if (since.value.trim()) qs.set('since', since.value.trim());
    if (until.value.trim()) qs.set('until', until.value.trim());
    location.hash = `#/figures?${qs}`;
  });
  const s = await api('GET', '/v1/audit/stats', {query: {since: ctx.query.get('since'), until: ctx.query.get('until')}});
  const d = s.decisions, c = s.contests;
  const byDecision = ['allow', 'review', 'block'].map((k) => ({label: k, value: d.by_decision[k] || 0, cls: `bar-${k}`}));
  const byLabel = Object.entries(d.by_label).map(([k, v]) => ({label: k, value: v}));
  const byVersion = d.by_model_version.map((r) => ({label: `${r.model_name} v${r.model_version}`, value: r.count}));
  const overturn = c.overturn_rate_by_model_version.map((r) => ({label: `${r.model_name} v${r.model_version}`,
    value: r.rate ?? 0, text: r.rate === null ? 'no resolution' : `${(r.rate * 100).toFixed(0)}% (${r.overturned}/${r.resolved})`}));
  const chartOr = (items, opts) => (items.length ? hbars(items, opts) : el('p', {class: 'muted'}, 'None in this window.'));
  const perVersion = await contestCharts(s);
  replace(main, el('h1', {}, 'Transparency figures'), el('div', {class: 'card'}, form),
    el('div', {class: 'stats', id: 'figures'},
      stat('decisions', String(d.total), 'fig-decisions'), stat('contests filed', String(c.filed), 'fig-filed'),
      stat('resolved', String(c.resolved), 'fig-resolved'), stat('open', String(c.open), 'fig-open'),
      stat('median time to resolution', c.median_resolution_seconds === null ? '—'
        : fmtDuration(c.median_resolution_seconds), 'fig-median')),
    el('div', {class: 'grid2'},
      el('section', {class: 'card'}, el('h2', {}, 'Decisions by outcome'),
        chartOr(byDecision, {title: 'Decisions by outcome', ...countAxis(byDecision)})),
      el('section', {class: 'card'}, el('h2', {}, 'Decisions by label'),
        chartOr(byLabel, {title: 'Decisions by label', ...countAxis(byLabel)})),
      el('section', {class: 'card'}, el('h2', {}, 'Decisions by model version'),
        chartOr(byVersion, {title: 'Decisions by model version', ...countAxis(byVersion)})),
      el('section', {class: 'card', id: 'overturn'}, el('h2', {}, 'Overturn rate by model version'),
        chartOr(overturn, {min: 0, max: 1, title: 'Overturn rate by model version', labelWidth: 140})),
      perVersion));
}
