// build.mjs bundles the page (web/src/main.js + xterm's CSS + ours) into
// web/dist with content-hashed names, and writes web/dist/index.html.
// Run from anywhere: `node web/build.mjs` (`--dev` skips minification).
import * as esbuild from 'esbuild';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
const dev = process.argv.includes('--dev');

// Old hashed assets would otherwise pile up in the embedded binary.
await rm(join(dist, 'assets'), { recursive: true, force: true });
await rm(join(dist, 'index.html'), { force: true });
await mkdir(join(dist, 'assets'), { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: join(here, 'src', 'main.js') },
  bundle: true,
  format: 'esm',
  target: ['chrome110', 'firefox115', 'safari16'],
  minify: !dev,
  sourcemap: dev ? 'inline' : false,
  outdir: join(dist, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

let js = '';
let css = '';
for (const out of Object.keys(result.metafile.outputs)) {
  const rel = relative(dist, out).split('\\').join('/');
  if (rel.endsWith('.js')) js = rel;
  if (rel.endsWith('.css')) css = rel;
}
if (!js || !css) throw new Error(`build: missing output (js=${js} css=${css})`);

const template = await readFile(join(here, 'src', 'index.html'), 'utf8');
const html = template.replace('%CSS%', '/' + css).replace('%JS%', '/' + js);
await writeFile(join(dist, 'index.html'), html);
console.log(`web: built ${js} ${css}`);
