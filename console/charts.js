// Charts drawn as SVG through DOM APIs (no library, no markup strings). Each chart has role="img",
// an aria-label, and its numbers written as text beside the bars.
import {svg} from './dom.js';

/** Horizontal bars. items: [{label, value, cls?, text?}] (text: what to print after the bar).
 * opts: {min = 0, max, width = 560, labelWidth = 140, valueWidth = 90, markers: [{value, cls, label}], ticks, tickFormat, title}.
 * Markers (e.g. the review and block thresholds) are vertical lines across the score scale;
 * tickFormat(v) writes an axis tick (default: the number, two decimals unless an integer). */
export function hbars(items, opts = {}) {
  const width = opts.width || 560, labelW = opts.labelWidth || 140, valueW = opts.valueWidth || 90;
  const rowH = 26, top = opts.markers && opts.markers.length ? 22 : 8, axisH = 24;
  const min = opts.min ?? 0;
  const max = opts.max ?? Math.max(1, ...items.map((i) => i.value));
  const plotW = width - labelW - valueW;
  const x = (v) => labelW + ((Math.min(max, Math.max(min, v)) - min) / (max - min || 1)) * plotW;
  const height = top + items.length * rowH + axisH;
  const g = svg('svg', {class: 'chart', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
    'aria-label': opts.title || 'bar chart'}, svg('title', {}, opts.title || 'bar chart'));
  const ticks = opts.ticks || 5;
  for (let t = 0; t <= ticks; t++) {
    const v = min + ((max - min) * t) / ticks;
    g.appendChild(svg('line', {class: 'grid', x1: x(v), x2: x(v), y1: top, y2: top + items.length * rowH}));
    g.appendChild(svg('text', {x: x(v), y: height - 6, 'text-anchor': 'middle'},
      opts.tickFormat ? opts.tickFormat(v) : Number.isInteger(v) ? String(v) : v.toFixed(2)));
  }
  g.appendChild(svg('line', {class: 'axis', x1: labelW, x2: labelW + plotW, y1: top + items.length * rowH,
    y2: top + items.length * rowH}));
  items.forEach((it, i) => {
    const y = top + i * rowH;
    const x0 = x(Math.max(min, Math.min(0, max))), x1 = x(it.value);
    g.appendChild(svg('text', {x: labelW - 8, y: y + 17, 'text-anchor': 'end'}, it.label));
    g.appendChild(svg('rect', {class: `bar ${it.cls || ''}`, x: Math.min(x0, x1), y: y + 4,
      width: Math.max(1, Math.abs(x1 - x0)), height: rowH - 8},
    svg('title', {}, `${it.label}: ${it.text ?? it.value}`)));
    g.appendChild(svg('text', {x: labelW + plotW + 6, y: y + 17}, it.text ?? String(it.value)));
  });
  for (const m of opts.markers || []) {
    if (m.value === null || m.value === undefined) continue;
    g.appendChild(svg('line', {class: m.cls, x1: x(m.value), x2: x(m.value), y1: top - 4, y2: top + items.length * rowH}));
    g.appendChild(svg('text', {class: `${m.cls}-label`, x: x(m.value), y: top - 8, 'text-anchor': 'middle'},
      `${m.label} ${m.value}`));
  }
  return g;
}

/** The d-dimensional vector as columns around zero (positive up, negative down). */
export function vectorColumns(values, {width = 560, height = 120, title = 'vector'} = {}) {
  const n = values.length, mid = height / 2, colW = width / Math.max(1, n);
  const peak = Math.max(1e-9, ...values.map((v) => Math.abs(v)));
  const g = svg('svg', {class: 'chart', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title},
    svg('title', {}, title));
  g.appendChild(svg('line', {class: 'zero', x1: 0, x2: width, y1: mid, y2: mid}));
  values.forEach((v, i) => {
    const h = (Math.abs(v) / peak) * (mid - 4);
    g.appendChild(svg('rect', {class: v >= 0 ? 'pos' : 'neg', x: i * colW + 0.5, y: v >= 0 ? mid - h : mid,
      width: Math.max(0.5, colW - 1), height: Math.max(0.5, h)}, svg('title', {}, `[${i}] ${v}`)));
  });
  return g;
}

/** A heat-map matrix: rows × cols of counts, cells on the diagonal are agreements, others flips. */
export function matrix(rowNames, colNames, count, {title = 'matrix', rowAxis = '', colAxis = ''} = {}) {
  const cell = 74, left = 120, top = 56;
  const width = left + colNames.length * cell + 10, height = top + rowNames.length * cell + 10;
  const maxV = Math.max(1, ...rowNames.flatMap((r) => colNames.map((c) => count(r, c))));
  const g = svg('svg', {class: 'chart', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title},
    svg('title', {}, title));
  g.appendChild(svg('text', {x: left + (colNames.length * cell) / 2, y: 16, 'text-anchor': 'middle'}, colAxis));
  g.appendChild(svg('text', {x: 8, y: 16}, rowAxis));
  colNames.forEach((c, j) => g.appendChild(svg('text', {x: left + j * cell + cell / 2, y: top - 8, 'text-anchor': 'middle'}, c)));
  rowNames.forEach((r, i) => {
    g.appendChild(svg('text', {x: left - 8, y: top + i * cell + cell / 2 + 4, 'text-anchor': 'end'}, r));
    colNames.forEach((c, j) => {
      const v = count(r, c);
      const level = v === 0 ? 0 : Math.min(4, 1 + Math.floor((3 * v) / maxV));
      const cls = `cell heat-${level}${r !== c && v > 0 ? ' flip' : ''}`;
      g.appendChild(svg('rect', {class: cls, x: left + j * cell, y: top + i * cell, width: cell, height: cell},
        svg('title', {}, `${r} → ${c}: ${v}`)));
      g.appendChild(svg('text', {class: level >= 3 ? 'on-dark' : null, x: left + j * cell + cell / 2,
        y: top + i * cell + cell / 2 + 5, 'text-anchor': 'middle'}, String(v)));
    });
  });
  return g;
}
