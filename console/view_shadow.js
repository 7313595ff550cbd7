// The shadow report of a model as a decision-flip matrix (primary decision × shadow decision),
// with attach and detach.
import {api} from './api.js';
import {matrix} from './charts.js';
import {el, field, fmtNum, kv, replace, select} from './dom.js';

const DECISIONS = ['allow', 'review', 'block'];

/** Renders the report of model ctx.arg (attached shadow, or ?version=). */
export async function render(main, ctx) {
  const name = ctx.arg;
  const version = ctx.query.get('version');
  const models = await api('GET', '/v1/models');
  const m = models.models.find((x) => x.name === name);
  if (!m) throw new Error(`no model '${name}'`);
  let report = null, missing = null;
  try {
    report = await api('GET', `/v1/admin/models/${encodeURIComponent(name)}/shadow`, {query: {version}});
  } catch (e) {
    if (e.code !== 'no_shadow') throw e;
    missing = e.message;
  }
  const candidates = m.versions.filter((v) => v.version !== m.active_version && v.state !== 'failed');
  const pick = select('version', candidates.map((v) => [v.version, `version ${v.version}`]), m.shadow_version || '');
  const attach = el('form', {class: 'row', 'aria-label': 'Attach a shadow'}, field('Shadow version', pick),
    el('button', {type: 'submit'}, 'Attach as shadow'));
  attach.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api('POST', `/v1/admin/models/${encodeURIComponent(name)}/shadow`, {body: {version: pick.value}});
      location.hash = `#/shadow/${encodeURIComponent(name)}`;
      ctx.refresh();
    } catch (e) {
      ctx.showError(e);
    }
  });
  const detach = el('button', {type: 'button', class: 'secondary', disabled: !m.shadow_version}, 'Detach shadow');
  detach.addEventListener('click', async () => {
    try {
      await api('DELETE', `/v1/admin/models/${encodeURIComponent(name)}/shadow`);
      ctx.refresh();
    } catch (e) {
      ctx.showError(e);
    }
  });
  const body = report ? [
    el('div', {class: 'grid2'},
      el('section', {class: 'card', id: 'flip-matrix'}, el('h2', {}, 'Decision flips'),
        matrix(DECISIONS, DECISIONS, (r, c) => report.decision_matrix[r][c],
          {title: `Primary v${report.active_version} decision (rows) against shadow v${report.shadow_version} decision (columns)`,
            rowAxis: `primary v${report.active_version ?? '—'} ↓`, colAxis: `shadow v${report.shadow_version} →`})),
      el('section', {class: 'card'}, el('h2', {}, 'Agreement'),
        kv([['Shadow version', `${report.shadow_version}${report.attached ? ' (attached)' : ' (detached)'}`],
          ['Active version', report.active_version ?? 'none'], ['Items compared', String(report.items)],
          ['Decision agreements', String(report.decision_agreements)], ['Decision flips', String(report.decision_flips)],
          ['Label agreement', fmtNum(report.label_agreement)], ['Decision agreement', fmtNum(report.decision_agreement)],
          ['Mean |Δ score|', fmtNum(report.mean_abs_score_difference)],
          ['Max |Δ score|', fmtNum(report.max_abs_score_difference)]])))]
    : el('p', {class: 'notice'}, missing);
  replace(main, el('h1', {}, `Shadow report: ${name}`),
    el('section', {class: 'card row'}, candidates.length ? attach : el('span', {class: 'muted'}, 'No other version to shadow.'), detach),
    body);
}
