/** `npm run lint`: fails when the import graph has a cycle or breaks a layering rule (import-graph.ts). */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importCycles, importGraph, layeringViolations } from './import-graph.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const graph = importGraph(root, ['src', 'test', 'bench', 'scripts']);
const problems = [
  ...importCycles(graph).map((c) => `import cycle: ${c.join(' ↔ ')}`),
  ...layeringViolations(graph),
];
if (problems.length > 0) {
  process.stderr.write(`${problems.join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`imports: ${graph.size} files, no cycle, layering kept\n`);
