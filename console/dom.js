// DOM helpers. Every value is put into the page with textContent or setAttribute, never as markup:
// item ids, reasons and notes come from clients and reviewers and must render as text.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'text') node.textContent = String(v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  append(node, children);
  return node;
}

/** Appends children (nodes, strings/numbers as text nodes, nested arrays; null/false skipped). */
export function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** el('a', {href: '#/x', class: 'y', onclick: fn}, 'text', child, ...): an HTML element. */
export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** The same for SVG elements (charts are built with DOM APIs, not markup). */
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Removes every child of node, then appends children. */
export function replace(node, ...children) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return append(node, children);
}

let uid = 0;
/** A unique element id, for label/for pairs. */
export function nextId(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** A labelled form control: {label, control} where control is an input/select/textarea element. */
export function field(label, control) {
  if (!control.id) control.id = nextId('f');
  return el('div', {class: 'field'}, el('label', {for: control.id}, label), control);
}

/** A <select> with [value, text] options, `selected` chosen. */
export function select(name, options, selected) {
  return el('select', {name}, options.map(([v, t]) => el('option', {value: v, selected: v === selected}, t)));
}

export function badge(value, cls) {
  return el('span', {class: `badge b-${cls || value}`}, value);
}

/** A <dl> of [term, value] rows; a value may be a node or text. */
export function kv(rows) {
  return el('dl', {class: 'kv'}, rows.filter(Boolean).map(([k, v]) => [el('dt', {}, k), el('dd', {}, v ?? '—')]));
}

export function fmtTime(iso) {
  if (!iso) return '—';
  return String(iso).replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function fmtNum(v, digits = 4) {
  if (v === null || v === undefined) return '—';
  return Number(v).toFixed(digits);
}

/** A duration in seconds as "3d 4h", "5h 2m", "12m", "40s". */
export function fmtDuration(s) {
  if (s === null || s === undefined) return '—';
  s = Math.max(0, Math.round(Number(s)));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m`;
  return `${s}s`;
}

/** A table from column headers and rows of cells (nodes or text); num: indexes of numeric columns. */
export function table(headers, rows, {num = [], caption} = {}) {
  return el('table', {},
    caption ? el('caption', {class: 'visually-hidden'}, caption) : null,
    el('thead', {}, el('tr', {}, headers.map((h, i) => el('th', {scope: 'col', class: num.includes(i) ? 'num' : null}, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c, i) => el('td', {class: num.includes(i) ? 'num' : null}, c ?? '—'))))));
}
