// speedscope_pprof.js: opens files in the real speedscope (the npm package under
// tests/convert/viewer) in Debian's chromium, driven by playwright-core (tests/convert/nodedeps,
// which never downloads a browser of its own), and prints one JSON line per file:
//   {"file", "title", "pprof": true when speedscope logged "Importing as protobuf encoded pprof
//    file", "errors": [console errors and page exceptions], "imported": the title became
//    "<name> - speedscope" within the time limit}
// Files are handed to speedscope as its own CLI does (speedscope.loadFileFromBase64 from a script
// named in #localProfilePath).
//   node speedscope_pprof.js NODE_MODULES CHROMIUM SPEEDSCOPE_INDEX_HTML WORK_DIR FILE...
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, chromiumPath, indexHtml, work, ...files] = process.argv.slice(2);
const { chromium } = require(path.resolve(modules, 'playwright-core'));

(async () => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--allow-file-access-from-files',
      '--disable-dev-shm-usage'],
  });
  for (const file of files) {
    const name = path.basename(file);
    const js = path.join(work, name + '.js');
    fs.writeFileSync(js, `speedscope.loadFileFromBase64(${JSON.stringify(name)}, ` +
      `${JSON.stringify(fs.readFileSync(file).toString('base64'))})`);
    const page = await browser.newPage();
    const errors = [];
    let pprof = false;
    page.on('console', (m) => {
      if (m.text().includes('Importing as protobuf encoded pprof file')) pprof = true;
      if (m.type() === 'error') errors.push('console: ' + m.text());
    });
    page.on('pageerror', (e) => errors.push('exception: ' + e.message));
    let failed = false; // speedscope tells an import failure with alert()
    page.on('dialog', (d) => {
      errors.push('dialog: ' + d.message());
      failed = true;
      d.dismiss().catch(() => {});
    });
    await page.goto('file://' + path.resolve(indexHtml) + '#localProfilePath=' + path.resolve(js));
    let imported = true;
    try {
      for (let t = 0; !failed; t += 100) {
        if ((await page.title()) === name + ' - speedscope') break;
        if (t >= 10000) throw new Error('timeout');
        await page.waitForTimeout(100);
      }
      if (failed) imported = false;
    } catch (e) {
      imported = false;
    }
    const title = await page.title();
    process.stdout.write(JSON.stringify({ file, title, pprof, errors, imported }) + '\n');
    await page.close();
  }
  await browser.close();
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
