// Opens a report in Debian's headless Chromium (playwright-core, never a downloaded browser),
// finds the main views, clicks a timeline event, checks its details, takes a screenshot.
// Fails on any console error or page error. Usage: node check.js REPORT.html SHOT.png EVENT_NAME [COLLECTION]
'use strict';
const { chromium } = require('playwright-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

(async () => {
  const [html, shot, eventName, group] = process.argv.slice(2);
  const userData = fs.mkdtempSync(path.join(os.tmpdir(), 'rlprof-chromium-'));
  const ctx = await chromium.launchPersistentContext(userData, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 1400, height: 1000 },
  });
  const errors = [];
  const page = await ctx.newPage();
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('page error: ' + e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) errors.push('network request: ' + r.url()); });
  await page.goto('file://' + path.resolve(html));
  for (const id of ['inputs', 'timeline', 'breakdown', 'ops', 'memory', 'comm']) {
    if (!(await page.$('section#' + id))) errors.push('missing view: ' + id);
  }
  if (await page.$('script#hostile')) errors.push('input markup became an element');
  const hostileLabel = await page.textContent('#ops');
  if (!hostileLabel.includes('<script id=hostile>')) errors.push('hostile name not shown as text');
  if (group) await page.selectOption('#tl-group', group);
  const pos = await page.evaluate((n) => window.rlprof && window.rlprof.eventCenter(n), eventName);
  if (!pos) errors.push('no visible timeline event named ' + eventName);
  else {
    await page.mouse.click(pos.x, pos.y);
    const details = await page.textContent('#details');
    if (!details.includes(eventName)) errors.push('details do not show the clicked event: ' + details);
    if (!details.includes('duration')) errors.push('details lack a duration: ' + details);
    console.log('details: ' + details.slice(0, 300));
  }
  // Zoom and pan must not throw.
  const box = await (await page.$('#tl-canvas')).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 30);
  await page.mouse.wheel(0, -300);
  await page.mouse.down(); await page.mouse.move(box.x + box.width / 2 + 80, box.y + 30); await page.mouse.up();
  // Sorting and filtering the ops table.
  await page.click('#op-table th:nth-child(3)');
  await page.fill('#op-filter', 'matmul');
  const rows = await page.$$eval('#op-table tbody tr', (r) => r.length);
  if (rows < 1) errors.push('op filter shows no row for matmul');
  await page.screenshot({ path: shot, fullPage: true });
  await ctx.close();
  fs.rmSync(userData, { recursive: true, force: true });
  if (errors.length) { console.error(errors.join('\n')); process.exit(1); }
  console.log('browser check passed');
})().catch((e) => { console.error(e); process.exit(1); });
