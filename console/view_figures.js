// Transparency figures (GET /v1/audit/stats): decisions by outcome, label and model version;
// contests filed, resolved and open, the median time to resolution and the overturn rate by
// model version, as charts.
import {api} from './api.js';
import {hbars} from './charts.js';
import {el, field, fmtDuration, replace} from './dom.js';

function stat(k, v, id) {
  return el('div', {class: 'stat', id}, el('span', {class: 'k'}, k), el('span', {class: 'v'}, v));
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
  replace(main, el('h1', {}, 'Transparency figures'), el('div', {class: 'card'}, form),
    el('div', {class: 'stats', id: 'figures'},
      stat('decisions', String(d.total), 'fig-decisions'), stat('contests filed', String(c.filed), 'fig-filed'),
      stat('resolved', String(c.resolved), 'fig-resolved'), stat('open', String(c.open), 'fig-open'),
      stat('median time to resolution', c.median_resolution_seconds === null ? '—'
        : fmtDuration(c.median_resolution_seconds), 'fig-median')),
    el('div', {class: 'grid2'},
      el('section', {class: 'card'}, el('h2', {}, 'Decisions by outcome'), chartOr(byDecision, {title: 'Decisions by outcome'})),
      el('section', {class: 'card'}, el('h2', {}, 'Decisions by label'), chartOr(byLabel, {title: 'Decisions by label'})),
      el('section', {class: 'card'}, el('h2', {}, 'Decisions by model version'), chartOr(byVersion, {title: 'Decisions by model version'})),
      el('section', {class: 'card', id: 'overturn'}, el('h2', {}, 'Overturn rate by model version'),
        chartOr(overturn, {min: 0, max: 1, title: 'Overturn rate by model version', labelWidth: 140}))));
}
