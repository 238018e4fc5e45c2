// build-addon-page.mjs bundles integration/testdata/sandbox-addon (the
// xterm.js page with the real SandboxAddon) into outdir with esbuild.
//   node integration/js/build-addon-page.mjs OUTDIR
import * as esbuild from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const src = resolve(here, '..', 'testdata', 'sandbox-addon');

/** buildAddonPage writes index.html, page.js and page.css into outdir. */
export async function buildAddonPage(outdir) {
  await mkdir(outdir, { recursive: true });
  await esbuild.build({
    entryPoints: { page: join(src, 'page.js') },
    bundle: true,
    format: 'esm',
    target: ['chrome110'],
    outdir,
    logLevel: 'warning',
  });
  await copyFile(join(src, 'index.html'), join(outdir, 'index.html'));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    console.error('usage: node build-addon-page.mjs OUTDIR');
    process.exit(2);
  }
  await buildAddonPage(resolve(out));
  console.log(out);
}
