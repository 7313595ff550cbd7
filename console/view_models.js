// Models and versions with their state and sha256; activation and roll-back, each after an
// explicit confirmation in the page.
import {api} from './api.js';
import {badge, el, replace, table} from './dom.js';

// Builds the confirmation panel; the caller puts it in the page and then calls focusCancel(),
// so that focus is on Cancel before any key can be pressed (a focus deferred with setTimeout
// let an Escape pressed right after the panel appeared reach the page, not the panel).
function confirmPanel(text, confirmLabel, onConfirm, onCancel) {
  const yes = el('button', {type: 'button', class: 'danger'}, confirmLabel);
  const no = el('button', {type: 'button', class: 'secondary'}, 'Cancel');
  const panel = el('div', {class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm', 'aria-describedby': 'confirm-text'},
    el('p', {id: 'confirm-text'}, text), el('div', {class: 'row'}, yes, no));
  yes.addEventListener('click', onConfirm);
  no.addEventListener('click', onCancel);
  panel.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') onCancel(); });
  panel.focusCancel = () => no.focus();
  return panel;
}

function modelCard(m, ctx) {
  const slot = el('div', {'aria-live': 'polite'});
  const activeVersion = m.active_version;
  const ask = (v, verb) => {
    const text = `${verb} ${m.name} version ${v.version}? It is loaded and validated beside version ${activeVersion ?? '(none)'}, ` +
      'then swapped in atomically; requests in flight finish on the version they started with.';
    const panel = confirmPanel(text, `${verb} version ${v.version}`, async () => {
      ctx.clearError();
      replace(slot, el('p', {class: 'muted'}, `Loading and validating ${m.name} v${v.version}…`));
      try {
        const r = await api('POST', `/v1/admin/models/${encodeURIComponent(m.name)}/activate`, {body: {version: v.version}});
        await ctx.refresh();
        ctx.showNotice?.(`${r.model} v${r.version} is active (was v${r.previous_version ?? 'none'}).`);
      } catch (e) {
        replace(slot);
        ctx.showError(e);
      }
    }, () => replace(slot));
    replace(slot, panel);
    panel.focusCancel();
  };
  const rows = m.versions.map((v) => {
    const isActive = v.version === activeVersion;
    let action = null;
    if (!isActive && v.state !== 'failed' && v.state !== 'loading') {
      // a retired version older than the active one is a roll-back; anything else an activation
      const older = activeVersion !== null && v.version.localeCompare(activeVersion, undefined, {numeric: true}) < 0;
      const verb = v.state === 'retired' && older ? 'Roll back to' : 'Activate';
      action = el('button', {type: 'button', class: 'secondary', 'data-version': v.version,
        'aria-label': `${verb} ${m.name} version ${v.version}`}, verb === 'Activate' ? 'Activate…' : 'Roll back…');
      action.addEventListener('click', () => ask(v, verb));
    }
    return [v.version, badge(v.state), v.role ? badge(v.role, v.role === 'active' ? 'active' : 'review') : null,
      v.sha256 ? el('span', {class: 'mono'}, v.sha256) : el('span', {class: 'muted'}, 'not loaded yet'),
      v.task ? `${v.task}, D=${v.dims.D}, d=${v.dims.d}, K=${v.dims.K}` : null,
      v.error ? el('span', {class: 'wrap'}, v.error) : null, action];
  });
  return el('section', {class: 'card model', 'data-model': m.name, 'aria-labelledby': `model-${m.name}`},
    el('h2', {id: `model-${m.name}`}, m.name),
    el('p', {}, 'Active: ', el('strong', {class: 'active-version'}, activeVersion ?? 'none'),
      ' · shadow: ', m.shadow_version ?? 'none', ' · ',
      el('a', {href: `#/shadow/${encodeURIComponent(m.name)}`}, 'Shadow report')),
    table(['Version', 'State', 'Role', 'Weights SHA-256', 'Shape', 'Error', ''], rows, {caption: `Versions of ${m.name}`}),
    slot);
}

/** Renders every model with its versions. */
export async function render(main, ctx) {
  const notice = el('p', {class: 'notice', id: 'models-notice', hidden: true, 'aria-live': 'polite'});
  const list = await api('GET', '/v1/models');
  const view = {...ctx,
    refresh: async () => {
      const fresh = await api('GET', '/v1/models');
      replace(cards, fresh.models.map((m) => modelCard(m, view)));
    },
    showNotice: (text) => {
      notice.textContent = text;
      notice.hidden = false;
    }};
  const cards = el('div', {}, list.models.map((m) => modelCard(m, view)));
  replace(main, el('h1', {}, 'Models'), notice, cards);
}
