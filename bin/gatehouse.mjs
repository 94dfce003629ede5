#!/usr/bin/env node
// The `gatehouse` command (package.json "bin"). In a checkout it runs the TypeScript sources through
// tsx; in an installation without them (the container image) it runs the compiled dist/.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);
// The test build (scripts/test-build.mjs) compiles src/ in place beside the sources.
const beside = new URL('../src/cli/main.js', import.meta.url);
let main;
if (existsSync(beside)) {
  main = await import(beside.href);
} else if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  main = await import(source.href);
} else {
  main = await import(compiled.href);
}
process.exitCode = await main.runCli(process.argv.slice(2), main.processIO);
