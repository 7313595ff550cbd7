// The console's shell: sign-in, navigation by role, and a router on location.hash.
// Routes: #/decisions, #/decision/<id>, #/contests, #/figures, #/audit (reviewer);
//         #/models, #/shadow/<model>, #/metrics, #/audit, #/figures (admin).
import {api, ApiError, probeRole, session} from './api.js';
import {el, field, replace} from './dom.js';
import * as decisions from './view_decisions.js';
import * as decision from './view_decision.js';
import * as contests from './view_contests.js';
import * as figures from './view_figures.js';
import * as models from './view_models.js';
import * as shadow from './view_shadow.js';
import * as metrics from './view_metrics.js';
import * as audit from './view_audit.js';

const VIEWS = {
  decisions: {view: decisions, roles: ['reviewer'], nav: 'Decisions'},
  decision: {view: decision, roles: ['reviewer']},
  contests: {view: contests, roles: ['reviewer'], nav: 'Contest queue'},
  figures: {view: figures, roles: ['reviewer', 'admin'], nav: 'Transparency'},
  models: {view: models, roles: ['admin'], nav: 'Models'},
  shadow: {view: shadow, roles: ['admin']},
  metrics: {view: metrics, roles: ['admin'], nav: 'Metrics'},
  audit: {view: audit, roles: ['reviewer', 'admin'], nav: 'Audit chain'},
};
const HOME = {reviewer: 'decisions', admin: 'models'};

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const alertBox = document.getElementById('alert');
let cleanup = null; // stops the shown view's timers; null when it has none
let routeSeq = 0;    // counts route() calls: a render that a later route() overtook is dropped

/** Shows an error (ApiError or Error) in the alert region, as text. */
export function showError(e) {
  const text = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e && e.message ? e.message : e);
  replace(alertBox, text);
  alertBox.hidden = false;
}

function clearError() {
  alertBox.hidden = true;
  replace(alertBox);
}

function renderNav(current) {
  const role = session.role();
  replace(nav, Object.entries(VIEWS).filter(([, v]) => v.nav && role && v.roles.includes(role)).map(([name, v]) =>
    el('a', {href: `#/${name}`, 'aria-current': name === current ? 'page' : null}, v.nav)));
  replace(who, role ? [el('span', {}, `signed in as ${role}`),
    el('button', {type: 'button', class: 'secondary', id: 'signout', onclick: signOut}, 'Sign out')] : []);
}

function signOut() {
  session.clear();
  location.hash = '#/signin';
  route();
}

function signIn() {
  const key = el('input', {type: 'password', name: 'key', autocomplete: 'off', spellcheck: 'false', required: true});
  const status = el('p', {class: 'muted', 'aria-live': 'polite'});
  const form = el('form', {class: 'card stack', 'aria-labelledby': 'signin-h'},
    el('h1', {id: 'signin-h'}, 'Sign in'),
    el('p', {class: 'muted'}, 'Use a reviewer key (decisions, contests, figures) or an admin key (models, shadows, metrics). ' +
      'The key stays in this tab (sessionStorage) and is sent only as an Authorization header.'),
    field('API key', key),
    el('button', {type: 'submit'}, 'Sign in'), status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    status.textContent = 'Checking the key…';
    try {
      const value = key.value.trim();
      const role = await probeRole(value);
      if (role === 'scorer') throw new Error('a scorer key cannot use the console: sign in with a reviewer or an admin key');
      session.set(value, role);
      key.value = '';
      const target = `#/${HOME[role]}`;
      if (location.hash === target) route(); // no hashchange will come
      else location.hash = target;           // the hashchange listener routes, once
    } catch (e) {
      status.textContent = '';
      showError(e);
    }
  });
  replace(main, el('div', {class: 'signin'}, form));
  key.focus();
}

/** Parses location.hash "#/name/arg?query" into {name, arg, query}. */
function parseHash() {
  const h = location.hash.replace(/^#\/?/, '');
  const [path, qs] = h.split('?');
  const [name, ...rest] = path.split('/');
  return {name, arg: rest.length ? decodeURIComponent(rest.join('/')) : null, query: new URLSearchParams(qs || '')};
}

// Each call renders into its own container. A render still waiting on the API when the next
// call starts writes only into its own, detached container; when it ends, its timers are
// stopped and its errors dropped, so it can never replace the page the user moved on to.
async function route() {
  const seq = ++routeSeq;
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  clearError();
  const {name, arg, query} = parseHash();
  const role = session.role();
  if (!session.key() || !role) {
    renderNav(null);
    signIn();
    return;
  }
  const entry = VIEWS[name];
  if (!entry || !entry.roles.includes(role)) {
    location.replace(`#/${HOME[role]}`);
    return;
  }
  renderNav(name);
  const view = el('div', {class: 'view'}, el('p', {class: 'muted'}, 'Loading…'));
  replace(main, view);
  let viewCleanup = null;
  let failure = null;
  try {
    viewCleanup = (await entry.view.render(view, {arg, query, showError, clearError, refresh: route})) || null;
  } catch (e) {
    failure = e;
  }
  if (seq !== routeSeq) { // overtaken: a later route() owns the page
    if (viewCleanup) viewCleanup();
    return;
  }
  cleanup = viewCleanup;
  if (failure) {
    if (failure instanceof ApiError && failure.status === 401) {
      session.clear();
      signIn();
    }
    showError(failure);
  }
  const h1 = view.querySelector('h1');
  if (h1) {
    h1.setAttribute('tabindex', '-1');
    h1.focus();
  }
}

window.addEventListener('hashchange', route);
route();
