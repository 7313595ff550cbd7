// Transparency figures (GET /v1/audit/stats): decisions by outcome, label and model version;
// contests filed, resolved and open, the median time to resolution and the overturn rate by
// model version, and contests filed and the median time to resolution per model version, as charts.
import {api} from './api.js';
import {hbars} from './charts.js';
import {el, field, fmtDuration, replace} from './dom.js';

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

/** The two per-version contest charts (cards): contests filed, and the median time to resolution,
 * by model version, from the figures' `contests.by_model_version` (the same snapshot as the rest). */
function contestCharts(c) {
  const filed = c.by_model_version.map((r) => ({label: `${r.model_name} v${r.model_version}`, value: r.filed,
    text: `${r.filed} (${r.resolved} resolved, ${r.open} open)`}));
  const medians = c.by_model_version.map((r) => {
    const label = `${r.model_name} v${r.model_version}`;
    return r.median_resolution_seconds === null ? {label, value: 0, cls: 'bar-muted', text: 'none resolved'}
      : {label, value: r.median_resolution_seconds, text: fmtDuration(r.median_resolution_seconds)};
  });
  const empty = () => el('p', {class: 'muted'}, 'None in this window.');
  return [
    el('section', {class: 'card', id: 'contests-by-version'}, el('h2', {}, 'Contests filed by model version'),
      filed.length ? hbars(filed, {title: 'Contests filed by model version', labelWidth: 140, valueWidth: 170,
        ...countAxis(filed)}) : empty()),
    el('section', {class: 'card', id: 'median-by-version'}, el('h2', {}, 'Median time to resolution by model version'),
      medians.length ? hbars(medians, {title: 'Median time to resolution by model version', labelWidth: 140,
        ...durationAxis(medians)}) : empty()),
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
  const perVersion = contestCharts(c);
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
