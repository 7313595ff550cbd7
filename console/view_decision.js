// One decision: provenance, probabilities against the thresholds, the vector and its nearest
// prototypes, contest history with the effective outcome, a contest form, a resolution form for an
// open contest, and a re-score beside the original answer.
import {api} from './api.js';
import {hbars, vectorColumns} from './charts.js';
import {badge, el, field, fmtNum, fmtTime, kv, nextId, replace, table} from './dom.js';

const DECISION_CLASS = {allow: 'bar-allow', review: 'bar-review', block: 'bar-block'};

/** The probabilities as bars on the 0..1 score scale, with the review and block thresholds drawn
 * as lines (threshold policies); the policy's label is highlighted in the colour of the decision. */
function probabilityChart(d) {
  const policy = d.policy || {};
  const items = Object.entries(d.probabilities).map(([label, p]) => ({
    label, value: p, text: fmtNum(p),
    cls: label === (policy.label || d.label) ? DECISION_CLASS[d.decision] : 'bar-muted',
  }));
  const markers = policy.kind === 'threshold'
    ? [{value: d.t_review, cls: 't-review', label: 'review ≥'}, {value: d.t_block, cls: 't-block', label: 'block ≥'}]
    : [];
  return hbars(items, {min: 0, max: 1, markers, ticks: 10,
    title: `Probabilities of decision ${d.decision_id}` + (markers.length ? `, review threshold ${d.t_review}, block threshold ${d.t_block}` : '')});
}

function policyText(p) {
  if (!p) return '—';
  if (p.kind === 'threshold') return `threshold on "${p.label}": review ≥ ${p.t_review}, block ≥ ${p.t_block}`;
  const acts = Object.entries(p.actions || {}).map(([l, a]) => `${l} → ${a}`).join(', ');
  return `label map (${acts}), min confidence ${p.min_confidence ?? 0}`;
}

function prototypesSection(d) {
  const np = d.nearest_prototypes;
  if (!np) {
    return el('p', {class: 'muted'}, `The prototypes of ${d.model_name} v${d.model_version} are not loaded now (only the active and the shadow version are), so the nearest prototypes cannot be shown.`);
  }
  return [
    hbars(np.map((p) => ({label: p.label, value: p.similarity, text: fmtNum(p.similarity)})),
      {min: -1, max: 1, ticks: 4, title: 'Cosine similarity of the vector to each class prototype'}),
    el('p', {class: 'muted'}, 'Cosine similarity of the 64-d vector to the class prototypes of the version that decided, nearest first.'),
  ];
}

function contestsSection(d) {
  if (!d.contests.length) return el('p', {class: 'muted'}, 'Never contested.');
  return table(['Filed (UTC)', 'Filed by', 'Reason', 'Outcome', 'Corrected label', 'Note', 'Resolved by', 'Resolved (UTC)'],
    d.contests.map((c) => [fmtTime(c.filed_at), c.filed_by, el('span', {class: 'wrap contest-reason'}, c.reason),
      c.resolution ? badge(c.resolution.outcome) : badge('open'),
      c.resolution ? c.resolution.corrected_label : null,
      c.resolution ? el('span', {class: 'wrap resolution-note'}, c.resolution.note) : null,
      c.resolution ? c.resolution.resolved_by : null, c.resolution ? fmtTime(c.resolution.resolved_at) : null]),
    {caption: 'Contest history, oldest first'});
}

function contestForm(d, ctx) {
  const reason = el('textarea', {name: 'reason', required: true, maxlength: 2000});
  const form = el('form', {class: 'stack', 'aria-label': 'File a contest'},
    el('h2', {}, 'File a contest'), field('Reason', reason), el('button', {type: 'submit'}, 'File contest'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    ctx.clearError();
    try {
      await api('POST', `/v1/decisions/${encodeURIComponent(d.decision_id)}/contests`, {body: {reason: reason.value}});
      ctx.refresh();
    } catch (e) {
      ctx.showError(e);
    }
  });
  return form;
}

/** The resolution form of an open contest: outcome (upheld / overturned), a corrected label
 * (overturned only) from the decision's labels, and a note. */
export function resolutionForm(contest, labels, ctx) {
  const name = nextId('outcome');
  const radio = (value, text) => {
    const input = el('input', {type: 'radio', name, value, id: `${name}-${value}`, required: true});
    return [input, el('label', {for: input.id}, text)];
  };
  const corrected = el('select', {name: 'corrected_label', disabled: true},
    el('option', {value: ''}, '(keep the label)'), labels.map((l) => el('option', {value: l}, l)));
  const note = el('textarea', {name: 'note', required: true, maxlength: 2000});
  const outcome = el('fieldset', {}, el('legend', {}, 'Outcome'), radio('upheld', 'Upheld'), radio('overturned', 'Overturned'));
  outcome.addEventListener('change', () => {
    corrected.disabled = form.querySelector(`input[name="${name}"]:checked`)?.value !== 'overturned';
  });
  const form = el('form', {class: 'stack', 'aria-label': 'Resolve the contest'},
    el('h2', {}, 'Resolve the open contest'),
    el('p', {class: 'muted wrap'}, 'Reason given: ', el('span', {class: 'open-reason'}, contest.reason)),
    outcome, field('Corrected label', corrected), field('Note', note),
    el('button', {type: 'submit'}, 'Record resolution'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    ctx.clearError();
    const value = form.querySelector(`input[name="${name}"]:checked`)?.value;
    const body = {outcome: value, note: note.value};
    if (value === 'overturned' && corrected.value) body.corrected_label = corrected.value;
    try {
      await api('POST', `/v1/contests/${encodeURIComponent(contest.contest_id)}/resolution`, {body});
      ctx.refresh();
    } catch (e) {
      ctx.showError(e);
    }
  });
  return form;
}

function rescoreSection(d, ctx) {
  const out = el('div', {'aria-live': 'polite'});
  const button = el('button', {type: 'button', class: 'secondary'}, 'Re-score with the active version');
  button.addEventListener('click', async () => {
    ctx.clearError();
    button.disabled = true;
    try {
      const r = await api('POST', `/v1/decisions/${encodeURIComponent(d.decision_id)}/rescore`);
      const labels = Object.keys(r.original.probabilities);
      const side = (a) => [
        kv([['Model', `${a.model_name} v${a.model_version}`], ['SHA-256', el('span', {class: 'mono'}, a.model_sha256)],
          ['Label', a.label], ['Decision', badge(a.decision)]]),
        hbars(labels.map((l) => ({label: l, value: a.probabilities[l], text: fmtNum(a.probabilities[l])})),
          {min: 0, max: 1, width: 420, labelWidth: 100, title: `Probabilities, ${a.model_name} v${a.model_version}`})];
      replace(out,
        el('div', {class: 'side'}, el('div', {}, el('h3', {}, 'Original'), side(r.original)),
          el('div', {}, el('h3', {}, 'Re-scored now'), side(r.rescored))),
        el('p', {class: 'muted'}, `Same label: ${r.same_label ? 'yes' : 'no'} · same decision: ${r.same_decision ? 'yes' : 'no'} · stored input: ${r.input_precision}`));
    } catch (e) {
      ctx.showError(e);
    } finally {
      button.disabled = false;
    }
  });
  return [button, out];
}

/** Renders decision ctx.arg. */
export async function render(main, ctx) {
  const d = await api('GET', `/v1/decisions/${encodeURIComponent(ctx.arg)}`);
  const eff = d.effective_outcome;
  const open = d.contests.find((c) => !c.resolution);
  const labels = Object.keys(d.probabilities);
  replace(main,
    el('h1', {}, 'Decision ', el('span', {class: 'wrap', id: 'decision-item'}, d.item_id)),
    el('div', {class: 'stats'},
      el('div', {class: 'stat'}, el('span', {class: 'k'}, 'automated decision'), el('span', {class: 'v'}, badge(d.decision))),
      el('div', {class: 'stat'}, el('span', {class: 'k'}, 'predicted label'), el('span', {class: 'v'}, d.label)),
      el('div', {class: 'stat', id: 'effective-outcome'}, el('span', {class: 'k'}, 'effective outcome'),
        el('span', {class: 'v'}, badge(eff.status), ' ', badge(eff.decision), ' ', eff.label,
          eff.decided_by === 'reviewer' ? el('span', {class: 'muted'}, ' · set by a reviewer') : null))),
    el('div', {class: 'grid2'},
      el('section', {class: 'card', 'aria-labelledby': 'h-prob'}, el('h2', {id: 'h-prob'}, 'Probabilities and thresholds'),
        probabilityChart(d), el('p', {class: 'muted'}, 'Policy: ', policyText(d.policy))),
      el('section', {class: 'card', 'aria-labelledby': 'h-prov'}, el('h2', {id: 'h-prov'}, 'Provenance'),
        kv([['Decision id', el('span', {class: 'mono'}, d.decision_id)], ['Created (UTC)', fmtTime(d.created_at)],
          ['Item id', el('span', {class: 'wrap'}, d.item_id)], ['Request id', el('span', {class: 'mono'}, d.request_id)],
          ['Model', `${d.model_name} version ${d.model_version}`], ['Weights SHA-256', el('span', {class: 'mono'}, d.model_sha256)],
          ['Input SHA-256', el('span', {class: 'mono'}, d.input_sha256)], ['Input stored', d.input_stored || 'no'],
          ['Latency', `${d.latency_us} µs`],
          ['Audit chain', d.chain ? el('span', {class: 'mono'}, `entry ${d.chain.seq}, ${d.chain.hash}`) : 'older than the chain']]))),
    el('div', {class: 'grid2'},
      el('section', {class: 'card', 'aria-labelledby': 'h-proto'}, el('h2', {id: 'h-proto'}, 'Nearest prototypes'), prototypesSection(d)),
      el('section', {class: 'card', 'aria-labelledby': 'h-vec'}, el('h2', {id: 'h-vec'}, `Vector (${d.vector.length}-d)`),
        vectorColumns(d.vector, {title: `The ${d.vector.length}-d vector`}))),
    el('section', {class: 'card', 'aria-labelledby': 'h-contests'}, el('h2', {id: 'h-contests'}, 'Contest history'),
      contestsSection(d)),
    el('section', {class: 'card'}, open ? resolutionForm(open, labels, ctx) : contestForm(d, ctx)),
    el('section', {class: 'card', 'aria-labelledby': 'h-rescore'}, el('h2', {id: 'h-rescore'}, 'Re-score'),
      d.input_stored ? rescoreSection(d, ctx) : el('p', {class: 'muted'}, 'The input was not stored, so it cannot be re-scored.')));
}
