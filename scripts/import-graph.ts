/**
 * The import graph of the sources, and the rules it must follow (run by `npm run lint` through
 * scripts/check-imports.ts, and by test/foundation/imports.test.ts):
 * - no import cycle anywhere (type-only imports count: a cycle of types is still two modules that
 *   cannot be understood one without the other);
 * - `mail/` is a leaf: it imports nothing from the features (auth, storage, http, hasura) nor the
 *   composition root; account flows reach it through its MailPort (mail/port.ts);
 * - route files (any `routes/` folder) do not reach the database or an object-store backend: no import
 *   of `db/`, of a `*-store.ts` data module or of a backend implementation; they call the domain.
 * Relative imports only are followed; packages and node: built-ins are leaves.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export type ImportGraph = Map<string, string[]>;

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(full));
    else if (/\.(ts|mts|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** The graph of relative imports between the files under `dirs` (paths relative to `root`). */
export function importGraph(root: string, dirs: readonly string[]): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const dir of dirs) {
    for (const file of sourceFiles(path.join(root, dir))) {
      const text = readFileSync(file, 'utf8');
      const targets = new Set<string>();
      for (const m of text.matchAll(IMPORT)) {
        const spec = m[1] ?? m[2];
        if (spec === undefined || !spec.startsWith('.')) continue;
        targets.add(path.relative(root, path.resolve(path.dirname(file), spec)));
      }
      graph.set(path.relative(root, file), [...targets].sort());
    }
  }
  return graph;
}

/** Every import cycle, each as the list of files that form it (Tarjan's strongly connected components). */
export function importCycles(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter);
    counter += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      const selfLoop = (graph.get(v) ?? []).includes(v);
      if (component.length > 1 || selfLoop) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

/** Imports that break a layering rule, as `from → to: why`. */
export function layeringViolations(graph: ImportGraph): string[] {
  const out: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      if (
        from.startsWith('src/mail/') &&
        !/^src\/(mail\/|config\.ts$|errors\.ts$|db\/|metrics\/events\.ts$)/.test(to)
      ) {
        out.push(
          `${from} → ${to}: mail/ is a leaf (config, errors, db, metric events and its own files only)`,
        );
      }
      if (
        from.startsWith('src/auth/') &&
        to.startsWith('src/mail/') &&
        !/^src\/mail\/(port|links|templates)\.ts$/.test(to)
      ) {
        out.push(
          `${from} → ${to}: auth reaches mail through its port (mail/port.ts), links and templates only`,
        );
      }
      // The backends' interface (object-store.ts: types and errors) is not a way to reach the store.
      const storeInterface = to === 'src/storage/backends/object-store.ts';
      const storeOrDb =
        /^src\/db\//.test(to) ||
        (/-store\.ts$/.test(to) && !storeInterface) ||
        (to.startsWith('src/storage/backends/') && !storeInterface);
      if (/^src\/(.*\/)?routes\//.test(from) && storeOrDb) {
        out.push(`${from} → ${to}: route files call the domain, never the database or a store directly`);
      }
    }
  }
  return out;
}
