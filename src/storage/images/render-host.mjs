/**
 * Entry point of an image render process (pool.ts starts it with the render module's URL as its
 * argument). Plain JavaScript so that the same file starts the TypeScript sources in a checkout (under
 * tsx, which a child process does not inherit by itself) and the compiled ones from dist/.
 */
const target = process.argv[2];
if (!target || !process.send) throw new Error('render-host.mjs is started by the image render pool');
if (target.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(target);
