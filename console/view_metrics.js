// A compact view of GET /metrics: throughput, latency percentiles by stage, the audit queue,
// requests by route. Refreshed every 5 seconds while the view is open.
import {metricsText} from './api.js';
import {hbars} from './charts.js';
import {el, replace, table} from './dom.js';

/** Parses the Prometheus text format into [{name, labels: {…}, value}]. */
export function parseMetrics(text) {
  const out = [];
  const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = sample.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(label)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    out.push({name: m[1], labels, value: Number(m[3])});
  }
  return out;
}

const sum = (samples, name) => samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
const gauge = (samples, name) => samples.find((s) => s.name === name)?.value ?? null;

/** The q-quantile of a cumulative histogram [{le, count}] (sorted, le may be Infinity), by linear
 * interpolation inside the bucket; null without observations. */
export function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1].count : 0;
  if (!total) return null;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      const inBucket = b.count - prevCount;
      return prevLe + (b.le - prevLe) * (inBucket ? (rank - prevCount) / inBucket : 0);
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

function latencyRows(samples) {
  const stages = {};
  for (const s of samples) {
    if (s.name !== 'pgcld_request_duration_seconds_bucket') continue;
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    (stages[s.labels.stage] ||= []).push({le, count: s.value});
  }
  return Object.entries(stages).map(([stage, b]) => {
    b.sort((x, y) => x.le - y.le);
    const ms = (v) => (v === null ? null : v * 1000);
    return {stage, n: b[b.length - 1].count, p50: ms(quantile(b, 0.5)), p90: ms(quantile(b, 0.9)), p99: ms(quantile(b, 0.99))};
  });
}

const fmtMs = (v) => (v === null ? '—' : `${v.toFixed(2)} ms`);

/** Renders the metrics and refreshes them; returns the function that stops the refresh. */
export async function render(main, ctx) {
  const body = el('div', {'aria-live': 'off'});
  replace(main, el('h1', {}, 'Metrics'), el('p', {class: 'muted'}, 'From GET /metrics, refreshed every 5 seconds.'), body);
  let previous = null;
  const tick = async () => {
    let text;
    try {
      text = await metricsText();
    } catch (e) {
      ctx.showError(e);
      return;
    }
    const samples = parseMetrics(text);
    const now = performance.now();
    const items = sum(samples, 'pgcld_items_scored_total'), requests = sum(samples, 'pgcld_requests_total');
    let itemRate = '—', reqRate = '—';
    if (previous) {
      const dt = (now - previous.t) / 1000;
      itemRate = `${((items - previous.items) / dt).toFixed(1)}/s`;
      reqRate = `${((requests - previous.requests) / dt).toFixed(1)}/s`;
    }
    previous = {t: now, items, requests};
    const lat = latencyRows(samples);
    const routes = {};
    for (const s of samples) if (s.name === 'pgcld_requests_total') routes[s.labels.route] = (routes[s.labels.route] || 0) + s.value;
    const topRoutes = Object.entries(routes).sort((a, b) => b[1] - a[1]).slice(0, 8);
    const active = samples.filter((s) => s.name === 'pgcld_model_active_info');
    const stat = (k, v, id) => el('div', {class: 'stat', id}, el('span', {class: 'k'}, k), el('span', {class: 'v'}, v));
    replace(body,
      el('div', {class: 'stats'},
        stat('items scored', String(items), 'm-items'), stat('items/s', itemRate, 'm-item-rate'),
        stat('requests', String(requests), 'm-requests'), stat('requests/s', reqRate, 'm-req-rate'),
        stat('audit queue rows', String(gauge(samples, 'pgcld_audit_queue_rows') ?? '—'), 'm-audit-queue'),
        stat('in flight', String(gauge(samples, 'pgcld_in_flight_requests') ?? '—'), 'm-in-flight'),
        stat('models ready', String(gauge(samples, 'pgcld_models_ready') ?? '—'), 'm-models'),
        stat('draining', gauge(samples, 'pgcld_draining') ? 'yes' : 'no', 'm-draining')),
      el('div', {class: 'grid2'},
        el('section', {class: 'card', id: 'latency'}, el('h2', {}, 'Latency percentiles by stage'),
          lat.length ? [table(['Stage', 'Requests', 'p50', 'p90', 'p99'],
            lat.map((r) => [r.stage, String(r.n), fmtMs(r.p50), fmtMs(r.p90), fmtMs(r.p99)]), {num: [1, 2, 3, 4]}),
          hbars(lat.map((r) => ({label: `${r.stage} p99`, value: r.p99 ?? 0, text: fmtMs(r.p99)})),
            {title: 'p99 latency by stage, milliseconds'})]
            : el('p', {class: 'muted'}, 'No scoring request yet.')),
        el('section', {class: 'card'}, el('h2', {}, 'Requests by route'),
          topRoutes.length ? hbars(topRoutes.map(([r, v]) => ({label: r, value: v})), {labelWidth: 260, title: 'Requests by route'})
            : el('p', {class: 'muted'}, 'No request yet.'))),
      el('section', {class: 'card'}, el('h2', {}, 'Serving'),
        table(['Model', 'Active version', 'Weights SHA-256'], active.map((s) => [s.labels.model, s.labels.version,
          el('span', {class: 'mono'}, s.labels.sha256)]), {caption: 'Active versions'})));
  };
  await tick();
  const timer = setInterval(tick, 5000);
  return () => clearInterval(timer);
}
