// The contest queue: open contests oldest first with their age and deadline (filing +
// --contest-window-days, from the API), or the resolved ones, most recent first.
import {api} from './api.js';
import {badge, el, fmtDuration, fmtTime, replace, table} from './dom.js';

/** Renders the queue for ?status=open (default) or resolved, with cursor paging. */
export async function render(main, ctx) {
  const status = ctx.query.get('status') === 'resolved' ? 'resolved' : 'open';
  const results = el('section', {'aria-live': 'polite'});
  replace(main, el('h1', {}, status === 'open' ? 'Contest queue: open' : 'Contest queue: resolved'),
    el('p', {class: 'row'},
      el('a', {href: '#/contests?status=open', 'aria-current': status === 'open' ? 'page' : null}, 'Open, oldest first'), ' · ',
      el('a', {href: '#/contests?status=resolved', 'aria-current': status === 'resolved' ? 'page' : null}, 'Resolved, newest first')),
    el('p', {class: 'muted'}, 'Each contest must be resolved by its deadline: its filing time plus the contest window the daemon is configured with (--contest-window-days).'),
    results);
  const cursors = [null];
  const load = async (cursor) => {
    let page;
    try {
      page = await api('GET', '/v1/contests', {query: {status, limit: 50, cursor}});
    } catch (e) {
      ctx.showError(e);
      return;
    }
    const rows = page.contests.map((c) => [
      fmtTime(c.filed_at), fmtDuration(c.age_seconds),
      el('span', {}, fmtTime(c.deadline), ' ', c.overdue ? badge('overdue')
        : el('span', {class: 'muted'}, `(${fmtDuration((Date.parse(c.deadline) - Date.now()) / 1000)} left)`)),
      el('a', {href: `#/decision/${encodeURIComponent(c.decision_id)}`, class: 'wrap contest-link'}, c.item_id),
      `${c.model_name} v${c.model_version}`, c.label, badge(c.decision),
      el('span', {class: 'wrap'}, c.filed_by), el('span', {class: 'wrap contest-reason'}, c.reason),
      c.resolution ? [badge(c.resolution.outcome), ' ', el('span', {class: 'wrap'}, c.resolution.note)]
        : el('a', {href: `#/decision/${encodeURIComponent(c.decision_id)}`}, 'Review and resolve')]);
    const prev = el('button', {type: 'button', class: 'secondary', disabled: cursors.length < 2}, 'Previous page');
    const next = el('button', {type: 'button', class: 'secondary', disabled: !page.next_cursor}, 'Next page');
    prev.addEventListener('click', () => { cursors.pop(); load(cursors[cursors.length - 1]); });
    next.addEventListener('click', () => { cursors.push(page.next_cursor); load(page.next_cursor); });
    replace(results,
      page.contests.length
        ? table(['Filed (UTC)', 'Age', 'Deadline (UTC)', 'Item', 'Model', 'Label', 'Decision', 'Filed by', 'Reason',
          status === 'open' ? 'Action' : 'Resolution'], rows, {caption: `${status} contests`})
        : el('p', {class: 'notice'}, status === 'open' ? 'No contest awaits resolution.' : 'No contest has been resolved yet.'),
      el('div', {class: 'pager'}, prev, next));
  };
  await load(null);
}
