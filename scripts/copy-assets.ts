/**
 * After `tsc`, copies every file of src/ that is not TypeScript (migrations, templates, default rules)
 * to the same place under dist/, so that `node dist/main.js` finds what `tsx src/main.ts` finds.
 */
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

export function copyAssets(from = path.join(root, 'src'), to = path.join(root, 'dist')): string[] {
  const copied: string[] = [];
  for (const entry of readdirSync(from, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
    // `parentPath` arrived in Node 20.12; `path` is its older name.
    const dir = entry.parentPath ?? (entry as unknown as { path: string }).path;
    const source = path.join(dir, entry.name);
    const target = path.join(to, path.relative(from, source));
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(source, target);
    copied.push(path.relative(from, source));
  }
  return copied;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const copied = copyAssets();
  process.stdout.write(`copied ${copied.length} asset file(s) to dist/\n`);
}
