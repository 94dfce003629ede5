/**
 * The `gatehouse` command line (package.json `bin`): the launcher runs, `--help` lists the commands found
 * in src/cli/commands/, and adding a command is adding one file there.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadCommands, runCli } from '../../src/cli/main.ts';
import { tempDir } from '../helpers/app.ts';
import { REPO_ROOT } from '../helpers/process.ts';

const BIN = path.join(REPO_ROOT, 'bin/gatehouse.mjs');
const dir = tempDir('gatehouse-cli-');
after(() => rmSync(dir, { recursive: true, force: true }));

/** An in-process CliIO that keeps what is printed. */
function captureIO() {
  let out = '';
  return {
    out: (t: string) => {
      out += t;
    },
    err: (t: string) => {
      out += t;
    },
    env: { DATA_DIR: dir },
    cwd: dir,
    input: () => '',
    now: () => new Date(),
    text: () => out,
  };
}

function gatehouse(...args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: dir,
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '', DATA_DIR: dir },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('the gatehouse command', () => {
  it('is the package bin, and --help lists its commands', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
    };
    assert.deepEqual(pkg.bin, { gatehouse: 'bin/gatehouse.mjs' });
    const help = gatehouse('--help');
    assert.equal(help.code, 0, help.err);
    assert.match(help.out, /^Usage: gatehouse <command> \[options\]/);
    assert.match(help.out, /\n {2}keys +Access-token signing keys: list, generate, rotate\n/);
  });

  it('answers an unknown command or subcommand with exit 2 and the help', () => {
    const unknown = gatehouse('frobnicate');
    assert.equal(unknown.code, 2);
    assert.match(unknown.err, /unknown command "frobnicate"/);
    assert.match(unknown.out, /Commands:/);
    const sub = gatehouse('keys', 'spin');
    assert.equal(sub.code, 2);
    assert.match(sub.err, /unknown subcommand "spin"/);
    const option = gatehouse('keys', 'list', '--loud');
    assert.equal(option.code, 2);
    assert.match(option.err, /unknown option --loud/);
    assert.match(gatehouse('keys', 'rotate', '--help').out, /^Usage: gatehouse keys rotate/);
  });

  it('every command and subcommand answers --help with its usage and exit 0', async () => {
    const commands = await loadCommands();
    for (const name of commands.keys()) {
      const io = captureIO();
      assert.equal(await runCli([name, '--help'], io), 0, name);
      assert.match(io.text(), new RegExp(`^Usage: gatehouse ${name}`), name);
      for (const sub of [...io.text().matchAll(/^ {2}([a-z-]+) {2,}/gm)].map((m) => m[1] as string)) {
        const subIO = captureIO();
        assert.equal(await runCli([name, sub, '--help'], subIO), 0, `${name} ${sub}`);
        assert.match(subIO.text(), new RegExp(`^Usage: gatehouse ${name} ${sub}`), `${name} ${sub}`);
      }
    }
    assert.deepEqual([...commands.keys()].sort(), [
      'keys',
      'migrate',
      'oauth-clients',
      'rules',
      'storage',
      'users',
      'webhooks',
    ]);
  });

  it('keys generate prints a private key of JWT_ALGORITHM, or of --algorithm', () => {
    const rs = gatehouse('keys', 'generate');
    assert.equal(rs.code, 0, rs.err);
    assert.equal(createPrivateKey(rs.out).asymmetricKeyType, 'rsa');
    const ec = gatehouse('keys', 'generate', '--algorithm', 'ES256');
    assert.equal(createPrivateKey(ec.out).asymmetricKeyDetails?.namedCurve, 'prime256v1');
    assert.equal(gatehouse('keys', 'generate', '--algorithm=HS256').code, 2);
  });

  it('finds every command file of a folder, so that adding a command is adding a file', async () => {
    const commands = tempDir('gatehouse-commands-');
    // Command files are in the CLI's own language: .js when the suites run compiled (scripts/test-build.mjs).
    const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    try {
      writeFileSync(
        path.join(commands, `hello.${ext}`),
        "export default { name: 'hello', summary: 'Says hello', help: 'Usage: gatehouse hello', run: async () => 0 };\n",
      );
      writeFileSync(path.join(commands, 'notes.md'), 'not a command');
      const found = await loadCommands(commands);
      assert.deepEqual([...found.keys()], ['hello']);
      writeFileSync(path.join(commands, `broken.${ext}`), 'export const x = 1;\n');
      await assert.rejects(loadCommands(commands), /broken\.[tj]s .* does not default-export a command/);
    } finally {
      rmSync(commands, { recursive: true, force: true });
    }
  });
});
