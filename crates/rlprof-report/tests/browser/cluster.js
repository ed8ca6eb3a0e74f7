// Opens a cluster report (many ranks) in Debian's headless Chromium (playwright-core): the page
// must open on the ranks' overview (the time it took is printed, not judged: timing belongs to
// BENCHMARKS.md), build no per-rank memory detail until
// an entry is opened, and build it when one is. Fails on any console or page error.
// Usage: node cluster.js REPORT.html
'use strict';
const { chromium } = require('playwright-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

(async () => {
  const [html] = process.argv.slice(2);
  const userData = fs.mkdtempSync(path.join(os.tmpdir(), 'rlprof-chromium-'));
  const ctx = await chromium.launchPersistentContext(userData, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const errors = [];
  const page = await ctx.newPage();
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('page error: ' + e.message));
  const t0 = Date.now();
  await page.goto('file://' + path.resolve(html));
  await page.waitForSelector('section#overview');
  const ms = Date.now() - t0;
  console.log('opened on the overview in ' + ms + ' ms');
  const canvases = await page.$$eval('canvas.mem-curve', (c) => c.length);
  if (canvases !== 0) errors.push(canvases + ' memory curves drawn before any entry was opened');
  const entries = await page.$$eval('details.lazy-memory', (d) => d.length);
  if (entries < 21) errors.push('expected a lazy memory entry per rank, found ' + entries);
  await page.click('details.lazy-memory > summary');
  // The curve is drawn by the entry's `toggle` handler, which the browser dispatches as a task
  // after the click: wait for it (up to 5 s; none at all is reported below), then count.
  await page.waitForFunction(
    () => document.querySelectorAll('details.lazy-memory canvas.mem-curve').length > 0,
    null, { timeout: 5000 }).catch(() => {});
  const after = await page.$$eval('details.lazy-memory canvas.mem-curve', (c) => c.length);
  if (after !== 1) errors.push('opening an entry drew ' + after + ' curves, not 1');
  await ctx.close();
  fs.rmSync(userData, { recursive: true, force: true });
  if (errors.length) { console.error(errors.join('\n')); process.exit(1); }
  console.log('cluster browser check passed');
})().catch((e) => { console.error(e); process.exit(1); });
