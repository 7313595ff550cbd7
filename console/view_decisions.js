// Decision search: the filters of GET /v1/decisions, newest first, with cursor paging.
import {api} from './api.js';
import {badge, el, field, fmtNum, fmtTime, replace, select, table} from './dom.js';

const FILTERS = ['model', 'version', 'label', 'decision', 'item_id', 'request_id', 'since', 'until', 'contest', 'limit'];

/** Renders the search form and the first page of results for the filters in the hash query. */
export async function render(main, ctx) {
  const q = ctx.query;
  const inputs = {
    model: el('input', {type: 'text', name: 'model', value: q.get('model') || ''}),
    version: el('input', {type: 'text', name: 'version', value: q.get('version') || ''}),
    label: el('input', {type: 'text', name: 'label', value: q.get('label') || ''}),
    decision: select('decision', [['', 'any'], ['allow', 'allow'], ['review', 'review'], ['block', 'block']], q.get('decision') || ''),
    item_id: el('input', {type: 'text', name: 'item_id', value: q.get('item_id') || ''}),
    request_id: el('input', {type: 'text', name: 'request_id', value: q.get('request_id') || ''}),
    since: el('input', {type: 'text', name: 'since', placeholder: '2026-11-21T00:00:00Z', value: q.get('since') || ''}),
    until: el('input', {type: 'text', name: 'until', placeholder: '2026-11-22T00:00:00Z', value: q.get('until') || ''}),
    contest: select('contest', [['', 'any'], ['open', 'open'], ['resolved', 'resolved'], ['contested', 'contested'],
      ['none', 'never contested']], q.get('contest') || ''),
    limit: select('limit', [['20', '20'], ['50', '50'], ['100', '100']], q.get('limit') || '20'),
  };
  const labels = {model: 'Model', version: 'Version', label: 'Predicted label', decision: 'Decision', item_id: 'Item id',
    request_id: 'Request id', since: 'Since (RFC 3339)', until: 'Until (RFC 3339)', contest: 'Contest status', limit: 'Per page'};
  const form = el('form', {class: 'filters', role: 'search', 'aria-label': 'Decision filters'},
    FILTERS.map((f) => field(labels[f], inputs[f])),
    el('div', {class: 'row'}, el('button', {type: 'submit'}, 'Search'),
      el('button', {type: 'reset', class: 'secondary'}, 'Clear')));
  const results = el('section', {'aria-label': 'Results', 'aria-live': 'polite'});
  replace(main, el('h1', {}, 'Decisions'), el('div', {class: 'card'}, form), results);

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const qs = new URLSearchParams();
    for (const f of FILTERS) if (inputs[f].value.trim()) qs.set(f, inputs[f].value.trim());
    const target = `#/decisions?${qs}`;
    if (location.hash === target) ctx.refresh();
    else location.hash = target;
  });
  form.addEventListener('reset', () => setTimeout(() => form.requestSubmit(), 0));

  const filters = {};
  for (const f of FILTERS) if (q.get(f)) filters[f] = q.get(f);
  if (!filters.limit) filters.limit = '20';
  const cursors = [null]; // cursor of each page shown so far; the last is the current page's
  const load = async (cursor) => {
    ctx.clearError();
    let page;
    try {
      page = await api('GET', '/v1/decisions', {query: {...filters, cursor}});
    } catch (e) {
      ctx.showError(e);
      replace(results);
      return;
    }
    const rows = page.decisions.map((d) => [
      el('span', {class: 'mono'}, fmtTime(d.created_at)),
      el('a', {href: `#/decision/${encodeURIComponent(d.decision_id)}`, class: 'wrap item-link'}, d.item_id),
      `${d.model_name} v${d.model_version}`, d.label, badge(d.decision),
      fmtNum(d.toxicity), badge(d.contest_status)]);
    const prev = el('button', {type: 'button', class: 'secondary', disabled: cursors.length < 2}, 'Previous page');
    const next = el('button', {type: 'button', class: 'secondary', disabled: !page.next_cursor}, 'Next page');
    prev.addEventListener('click', () => {
      cursors.pop();
      load(cursors[cursors.length - 1]);
    });
    next.addEventListener('click', () => {
      cursors.push(page.next_cursor);
      load(page.next_cursor);
    });
    replace(results,
      page.decisions.length ? table(['Created (UTC)', 'Item', 'Model', 'Label', 'Decision', 'Toxicity', 'Contest'], rows,
        {num: [5], caption: 'Matching decisions, newest first'})
        : el('p', {class: 'notice'}, 'No decision matches these filters.'),
      el('div', {class: 'pager'}, prev, next, el('span', {class: 'muted'}, `page ${cursors.length}`)));
  };
  await load(null);
}
