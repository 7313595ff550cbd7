// End-to-end test of the pgcld web console in headless Chromium (playwright-core driving Debian's
// /usr/bin/chromium). Started by run_console_test.py, which runs the daemon, makes the decisions
// and passes: PGCLD_URL, PGCLD_{SCORER,REVIEWER,REVIEWER2,ADMIN}_KEY, PGCLD_XSS (the probe, also an
// item id), PGCLD_SCREENSHOTS (directory for one PNG per view), PGCLD_SCORE_BODY (a score request).
//
// Steps, in order (each depends on the previous): the page and its headers; a reviewer signs in with
// the keyboard, searches, opens a decision and files a contest; the queue shows it with a deadline;
// a second reviewer resolves it as overturned and sees the effective outcome and the figures; the
// XSS probe renders as text everywhere and no dialog fires; the figures chart the contests and the
// median time to resolution per model version; the audit chain is intact; an operator activates
// version 2 and sees it serve, rolls back to version 1 and sees it serve again, attaches version 2
// as a shadow and sees the flip matrix, reads the metrics, and sees the per-version contest charts
// too. Throughout: no page error, no CSP violation, no failed request, the key never in a URL.
import {readFileSync} from 'node:fs';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set (run tests/browser/run_console_test.py)`);
  return process.env[k];
};
const BASE = env('PGCLD_URL'), XSS = env('PGCLD_XSS'), SHOTS = env('PGCLD_SCREENSHOTS');
const KEYS = {scorer: env('PGCLD_SCORER_KEY'), reviewer: env('PGCLD_REVIEWER_KEY'),
  reviewer2: env('PGCLD_REVIEWER2_KEY'), admin: env('PGCLD_ADMIN_KEY')};
const TIMEOUT = 90_000; // the AddressSanitizer build is slow

let passed = 0, failed = 0;
const problems = []; // page errors, CSP violations, dialogs, failed requests, keys in URLs

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    if (problems.length) throw new Error(`problems in the page: ${problems.join(' | ')}`);
    passed += 1;
    console.log(`ok ${passed + failed} - ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`not ok ${passed + failed} - ${name}\n  ${String(e.stack || e).split('\n').join('\n  ')}`);
    throw e;
  }
}

async function shot(page, name) {
  await page.waitForTimeout(150); // let the last layout settle
  await page.screenshot({path: join(SHOTS, `${name}.png`), fullPage: true});
}

async function signIn(page, key) {
  await page.goto(`${BASE}/console/`);
  const input = page.getByLabel('API key');
  await input.waitFor();
  await input.fill(key);
  await page.getByRole('button', {name: 'Sign in'}).click();
}

async function signOut(page) {
  await page.locator('#signout').click();
  await page.getByLabel('API key').waitFor();
  check(await page.evaluate(() => sessionStorage.length) === 0, 'sign-out clears sessionStorage');
}

const browser = await chromium.launch({
  executablePath: env('PGCLD_CHROMIUM'),
  headless: true,
  timeout: TIMEOUT,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
let exitCode = 0;
try {
  const context = await browser.newContext({viewport: {width: 1280, height: 900}});
  context.setDefaultTimeout(TIMEOUT);
  const page = await context.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => {
    problems.push(`a ${d.type()} dialog fired: ${d.message()}`);
    await d.dismiss();
  });
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`CSP: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (Object.values(KEYS).some((k) => r.url().includes(k))) problems.push(`a key in a URL: ${r.url().slice(0, 60)}`);
    if (!r.url().startsWith(BASE) && !r.url().startsWith('data:')) problems.push(`request off the origin: ${r.url()}`);
  });
  page.on('response', (r) => {
    // 404 no_shadow is an expected answer of the shadow report before a shadow is attached
    if (r.status() >= 500) problems.push(`${r.status()} for ${r.url()}`);
  });

  await step('console is served with a strict CSP and security headers', async () => {
    const bare = await page.request.get(`${BASE}/console`);
    check(bare.status() === 200 && bare.headers()['content-type'].startsWith('text/html'), '/console serves the page too');
    const r = await page.goto(`${BASE}/console/`);
    check(r.status() === 200, 'GET /console/ is 200');
    const h = r.headers();
    check(h['content-type'].startsWith('text/html'), 'text/html');
    const csp = h['content-security-policy'] || '';
    for (const d of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
      "frame-ancestors 'none'", "form-action 'none'", "base-uri 'none'"]) check(csp.includes(d), `CSP has ${d}`);
    check(!csp.includes('unsafe'), 'no unsafe-* in the CSP');
    check(h['x-content-type-options'] === 'nosniff', 'nosniff');
    check(h['referrer-policy'] === 'no-referrer', 'no-referrer');
    const js = await page.request.get(`${BASE}/console/app.js`);
    check(js.status() === 200 && js.headers()['content-type'].startsWith('text/javascript'), 'app.js is JavaScript');
    const missing = await page.request.get(`${BASE}/console/nope.js`);
    check(missing.status() === 404, 'an unknown file is 404');
    const html = await (await page.request.get(`${BASE}/console/`)).text();
    check(!/<script>|\sstyle=|\son[a-z]+=/i.test(html), 'no inline script, style or handler in index.html');
    await page.getByLabel('API key').waitFor();
    await shot(page, 'signin');
  });

  let probeDecision = null;
  await step('reviewer signs in with the keyboard and finds a decision', async () => {
    await page.getByLabel('API key').focus();
    await page.keyboard.type(KEYS.reviewer);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', {name: 'Decisions', level: 1}).waitFor();
    check(!page.url().includes(KEYS.reviewer), 'key not in the URL');
    check(await page.evaluate(() => sessionStorage.getItem('pgcld.console.role')) === 'reviewer', 'role reviewer');
    check(await page.locator('#nav a', {hasText: 'Models'}).count() === 0, 'a reviewer sees no operator view');
    await page.locator('table tbody tr').first().waitFor();
    check(await page.locator('table tbody tr').count() === 13, '13 decisions on the first page');
    await shot(page, 'decisions');
    // Filter on the probe's item id (exact match), then block decisions only.
    await page.getByLabel('Item id').fill(XSS);
    await page.getByLabel('Decision', {exact: true}).selectOption('block');
    await page.getByRole('button', {name: 'Search'}).click();
    await page.waitForFunction(() => document.querySelectorAll('table tbody tr').length === 1);
    const link = page.locator('a.item-link');
    check(await link.textContent() === XSS, 'the probe item id is shown as text in the list');
    await link.click();
    await page.locator('#decision-item').waitFor();
    probeDecision = decodeURIComponent(page.url().split('#/decision/')[1]);
  });

  await step('decision page: provenance, thresholds on the score scale, prototypes, re-score', async () => {
    check(await page.locator('#decision-item').textContent() === XSS, 'the item id renders as text');
    check(await page.locator('img').count() === 0, 'no <img> element was created');
    check(await page.locator('svg.chart line.t-review').count() === 1 && await page.locator('svg.chart line.t-block').count() === 1,
      'review and block thresholds drawn');
    const proto = await page.locator('#h-proto').locator('..').textContent();
    check(/non_toxic/.test(proto) && /toxic/.test(proto), 'nearest prototypes listed');
    check((await page.locator('dl.kv').first().textContent()).includes('Weights SHA-256'), 'provenance shown');
    await page.getByRole('button', {name: 'Re-score with the active version'}).click();
    await page.getByRole('heading', {name: 'Re-scored now'}).waitFor();
  });

  await step('reviewer files a contest whose reason is the XSS probe', async () => {
    await page.getByLabel('Reason').fill(`quotes an insult to condemn it ${XSS}`);
    await page.getByRole('button', {name: 'File contest'}).click();
    await page.getByRole('heading', {name: 'Resolve the open contest'}).waitFor();
    check((await page.locator('.contest-reason').textContent()).endsWith(XSS), 'the reason renders as text');
    check((await page.locator('#effective-outcome').textContent()).includes('contested'), 'effective outcome: contested');
    check(await page.locator('img').count() === 0, 'no <img> element was created');
    await shot(page, 'decision');
  });

  await step('the filer cannot resolve their own contest', async () => {
    await page.getByLabel('Overturned').check();
    await page.getByLabel('Note').fill('self-review');
    await page.getByRole('button', {name: 'Record resolution'}).click();
    await page.locator('#alert:not([hidden])').waitFor();
    check((await page.locator('#alert').textContent()).startsWith('filer_cannot_resolve'), 'filer_cannot_resolve shown');
  });

  await step('the contest queue lists the open contest with its age and deadline', async () => {
    await page.locator('#nav a', {hasText: 'Contest queue'}).click();
    await page.getByRole('heading', {name: 'Contest queue: open'}).waitFor();
    const rows = page.locator('table tbody tr');
    await rows.first().waitFor();
    check(await rows.count() === 1, 'one open contest');
    const text = await rows.first().textContent();
    check(text.includes(XSS), 'item id as text in the queue');
    check(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z/.test(await rows.first().locator('td').nth(2).textContent()), 'a deadline');
    check(await page.locator('img').count() === 0, 'no <img> element was created');
    await shot(page, 'contests');
    await signOut(page);
  });

  await step('a second reviewer resolves it as overturned and sees the effective outcome', async () => {
    await signIn(page, KEYS.reviewer2);
    await page.getByRole('heading', {name: 'Decisions', level: 1}).waitFor();
    await page.locator('#nav a', {hasText: 'Contest queue'}).click();
    await page.getByRole('link', {name: 'Review and resolve'}).click();
    await page.getByRole('heading', {name: 'Resolve the open contest'}).waitFor();
    await page.getByLabel('Overturned').check();
    await page.getByLabel('Corrected label').selectOption('non_toxic');
    await page.getByLabel('Note').fill(`quotation, not abuse ${XSS}`);
    await page.getByRole('button', {name: 'Record resolution'}).click();
    await page.getByRole('heading', {name: 'File a contest'}).waitFor();
    const eff = await page.locator('#effective-outcome').textContent();
    check(eff.includes('overturned') && eff.includes('allow') && eff.includes('non_toxic'), `effective outcome: ${eff}`);
    check((await page.locator('.resolution-note').textContent()).endsWith(XSS), 'the note renders as text');
    check(await page.locator('img').count() === 0, 'no <img> element was created');
    await shot(page, 'decision-overturned');
  });

  await step('the transparency figures count the resolution and the overturn', async () => {
    await page.locator('#nav a', {hasText: 'Transparency'}).click();
    await page.locator('#fig-resolved').waitFor();
    check((await page.locator('#fig-decisions .v').textContent()) === '13', 'decisions 13');
    check((await page.locator('#fig-filed .v').textContent()) === '1', 'filed 1');
    check((await page.locator('#fig-resolved .v').textContent()) === '1', 'resolved 1');
    check((await page.locator('#fig-open .v').textContent()) === '0', 'open 0');
    check((await page.locator('#fig-median .v').textContent()) !== '—', 'a median time to resolution');
    check((await page.locator('#overturn').textContent()).includes('100% (1/1)'), 'overturn rate 100% for v1');
    // per model version: contests filed and the median time to resolution, as SVG bar charts
    const filed = page.locator('svg.chart[role="img"][aria-label="Contests filed by model version"]');
    check(await filed.count() === 1, 'a chart of contests filed by model version');
    check(await filed.locator('rect.bar').count() === 1, 'one bar: v1 (the only version with a contest)');
    const filedText = await filed.textContent();
    check(filedText.includes('toxicity v1') && filedText.includes('1 (1 resolved, 0 open)'), `filed chart: ${filedText}`);
    check((await filed.locator('rect.bar title').textContent()).startsWith('toxicity v1: 1'), 'bar tooltip');
    const med = page.locator('svg.chart[role="img"][aria-label="Median time to resolution by model version"]');
    check(await med.count() === 1, 'a chart of the median time to resolution by model version');
    check(await med.locator('rect.bar:not(.bar-muted)').count() === 1, 'one bar with a median (v1)');
    const medTitle = await med.locator('rect.bar title').textContent();
    check(/^toxicity v1: \d+(s|m|h \d+m|d \d+h)$/.test(medTitle), `median bar: ${medTitle}`);
    check(Number(await med.locator('rect.bar').getAttribute('width')) > 1, 'the median bar has a length');
    check(await page.locator('.grid2 svg.chart').count() === 6, 'six charts on the figures page');
    await shot(page, 'figures');
    await page.goto(`${BASE}/console/#/contests?status=resolved`);
    await page.getByRole('heading', {name: 'Contest queue: resolved'}).waitFor();
    await page.locator('table tbody tr').first().waitFor();
    check((await page.locator('table tbody tr').first().textContent()).includes('overturned'), 'resolved queue');
  });

  await step('the audit chain verifies as intact', async () => {
    await page.locator('#nav a', {hasText: 'Audit chain'}).click();
    await page.locator('#chain-status').waitFor();
    check((await page.locator('#chain-status').textContent()).includes('intact'), 'intact');
    await shot(page, 'audit');
    await signOut(page);
  });

  await step('an operator activates version 2 after confirming, and it serves', async () => {
    await signIn(page, KEYS.admin);
    await page.getByRole('heading', {name: 'Models', level: 1}).waitFor();
    // signing in routes once: a second render could replace the page between the test's clicks
    check(await page.evaluate(() => performance.getEntriesByType('resource')
      .filter((e) => new URL(e.name).pathname === '/v1/models').length) === 1, 'one GET /v1/models after sign-in');
    check(await page.locator('#nav a', {hasText: 'Decisions'}).count() === 0, 'an operator sees no reviewer view');
    check((await page.locator('.active-version').textContent()) === '1', 'version 1 active');
    check(/[0-9a-f]{64}/.test(await page.locator('section.model table').textContent()), 'sha256 shown');
    await shot(page, 'models');
    await page.getByRole('button', {name: 'Activate toxicity version 2'}).click();
    await page.getByRole('alertdialog').waitFor();
    await page.getByRole('button', {name: 'Cancel'}).click();
    check(await page.getByRole('alertdialog').count() === 0, 'cancel closes the confirmation');
    check((await page.locator('.active-version').textContent()) === '1', 'still version 1 after cancel');
    await page.getByRole('button', {name: 'Activate toxicity version 2'}).click();
    await page.getByRole('button', {name: 'Activate version 2'}).click();
    await page.locator('#models-notice:not([hidden])').waitFor();
    check((await page.locator('.active-version').textContent()) === '2', 'version 2 active');
    const r = await fetch(`${BASE}/v1/score`, {method: 'POST', body: readFileSync(env('PGCLD_SCORE_BODY')),
      headers: {Authorization: `Bearer ${KEYS.scorer}`, 'Content-Type': 'application/json'}});
    const answer = await r.json();
    check(r.status === 200 && answer.model.version === '2', `scoring answers with version 2 (${r.status})`);
    check(await page.getByRole('button', {name: 'Roll back to toxicity version 1'}).count() === 1, 'roll back offered for v1');
    await shot(page, 'models-activated');
  });

  await step('the operator rolls back to version 1 after confirming, and it serves again', async () => {
    const rollBack = page.getByRole('button', {name: 'Roll back to toxicity version 1'});
    await rollBack.click();
    const dialog = page.getByRole('alertdialog');
    await dialog.waitFor();
    check((await dialog.textContent()).includes('Roll back to toxicity version 1?'), 'the confirmation names the version');
    // focus is on Cancel as soon as the panel is shown, so Escape dismisses it without acting
    check(await page.evaluate(() => document.activeElement?.textContent === 'Cancel' &&
      document.activeElement.closest('[role="alertdialog"]') !== null), 'focus on Cancel inside the confirmation');
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.querySelector('[role="alertdialog"]'));
    check((await page.locator('.active-version').textContent()) === '2', 'still version 2 after Escape');
    await rollBack.click();
    await page.getByRole('button', {name: 'Roll back to version 1'}).click();
    await page.locator('#models-notice', {hasText: 'toxicity v1 is active (was v2)'}).waitFor();
    check((await page.locator('.active-version').textContent()) === '1', 'version 1 active again');
    check(await page.getByRole('button', {name: 'Activate toxicity version 2'}).count() === 1, 'version 2 offered again');
    const r = await fetch(`${BASE}/v1/score`, {method: 'POST', body: readFileSync(env('PGCLD_SCORE_BODY')),
      headers: {Authorization: `Bearer ${KEYS.scorer}`, 'Content-Type': 'application/json'}});
    const answer = await r.json();
    check(r.status === 200 && answer.model.version === '1', `scoring answers with version 1 again (${r.status})`);
    const models = await (await fetch(`${BASE}/v1/models`, {headers: {Authorization: `Bearer ${KEYS.scorer}`}})).json();
    check(models.models.find((m) => m.name === 'toxicity').active_version === '1', 'GET /v1/models: version 1 active');
    await shot(page, 'models-rolled-back');
  });

  await step('operator attaches a shadow and reads the decision-flip matrix', async () => {
    await page.getByRole('link', {name: 'Shadow report'}).click();
    await page.getByRole('heading', {name: 'Shadow report: toxicity'}).waitFor();
    await page.getByLabel('Shadow version').selectOption('2');
    await page.getByRole('button', {name: 'Attach as shadow'}).click();
    await page.locator('#flip-matrix').waitFor();
    for (let i = 0; i < 3; i++) {
      await fetch(`${BASE}/v1/score`, {method: 'POST', body: readFileSync(env('PGCLD_SCORE_BODY')),
        headers: {Authorization: `Bearer ${KEYS.scorer}`, 'Content-Type': 'application/json'}});
    }
    const deadline = Date.now() + TIMEOUT;
    for (;;) { // the shadow scores off the response path: wait for its rows
      await page.reload();
      await page.locator('#flip-matrix').waitFor();
      const items = await page.locator('dl.kv').textContent();
      if (/Items compared9/.test(items)) break;
      check(Date.now() < deadline, `shadow rows arrive (${items})`);
      await page.waitForTimeout(500);
    }
    check(await page.locator('#flip-matrix svg rect').count() === 9, 'a 3×3 matrix');
    await shot(page, 'shadow');
  });

  await step('operator reads the metrics', async () => {
    await page.locator('#nav a', {hasText: 'Metrics'}).click();
    await page.locator('#m-items').waitFor();
    check(Number(await page.locator('#m-items .v').textContent()) >= 22, 'items scored counted');
    check((await page.locator('#latency').textContent()).includes('total'), 'latency of the total stage');
    check(/toxicity\s*1/.test(await page.locator('table').last().textContent()), 'serving toxicity v1');
    await shot(page, 'metrics');
  });

  await step('an operator reads the figures, per-version contest charts included (one API call)', async () => {
    await page.locator('#nav a', {hasText: 'Transparency'}).click();
    await page.locator('#contests-by-version').waitFor();
    check((await page.locator('#fig-filed .v').textContent()) === '1', 'filed 1');
    const filed = page.locator('svg.chart[aria-label="Contests filed by model version"]');
    check(await filed.count() === 1, 'the filed chart is shown to an admin key too');
    check((await filed.textContent()).includes('1 (1 resolved, 0 open)'), 'the same figures as the reviewer saw');
  });
} catch (e) {
  exitCode = 1;
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(exitCode || (failed ? 1 : 0));
