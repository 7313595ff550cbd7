// The audit chain's verification status (GET /v1/audit/verify).
import {api} from './api.js';
import {badge, el, kv, replace} from './dom.js';

/** Verifies the chain and renders the report. */
export async function render(main, ctx) {
  replace(main, el('h1', {}, 'Audit chain'), el('p', {class: 'muted'}, 'Verifying the hash chain…'));
  const r = await api('GET', '/v1/audit/verify');
  const again = el('button', {type: 'button', class: 'secondary'}, 'Verify again');
  again.addEventListener('click', () => ctx.refresh());
  replace(main, el('h1', {}, 'Audit chain'),
    el('section', {class: 'card', id: 'chain-status'},
      el('h2', {}, r.intact ? badge('intact') : badge('broken'), ' ',
        r.intact ? 'Every audit event checks out.' : 'The chain is NOT intact.'),
      kv([['Entries checked', String(r.events)], ['Head entry', String(r.head_seq)],
        ['Head hash', el('span', {class: 'mono'}, r.head_hash ?? '—')],
        ['First bad entry', r.first_bad_seq === null ? 'none' : String(r.first_bad_seq)],
        ['Reason', r.reason ?? '—']])),
    el('p', {class: 'muted'}, 'This checks consistency. Truncation or a rewritten history needs a signed checkpoint kept elsewhere: pgcld audit verify --checkpoint FILE.'),
    again);
}
