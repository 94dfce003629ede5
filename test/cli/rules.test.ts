/**
 * `gatehouse rules check` and `gatehouse rules explain`: the real command against an installation
 * whose service stored a file, on HBP's default rules and on a custom file. The explainer must be the
 * service's evaluator: the trace the service logs at debug level for a refused request is compared,
 * line for line, with what the command prints for the same request.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { type CliInstallation, cliInstallation } from '../helpers/cli.ts';
import { multipartBody } from '../helpers/multipart.ts';

const PASSWORD = 'a long enough password';

/** The lines of the explanation itself (from "operation:" to "decision:"). */
const explanationOf = (out: string) => {
  const lines = out.trimEnd().split('\n');
  return lines.slice(lines.findIndex((l) => l.startsWith('operation: ')));
};

describe('gatehouse rules', () => {
  let g: CliInstallation;
  let ownerId: string;
  let fileToken: string;
  const key = () => `user/${ownerId}/notes.txt`;

  before(async () => {
    g = await cliInstallation('pglite');
    const made = await g.gatehouse(
      'users',
      'create',
      'owner@example.com',
      '--password',
      PASSWORD,
      '--active',
    );
    assert.equal(made.code, 0, made.err);
    ownerId = made.out.trim();
    fileToken = await g.withService(async (_ctx, app) => {
      const login = await app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'owner@example.com', password: PASSWORD, cookie: false },
      });
      const mp = multipartBody([{ name: 'file', filename: 'notes.txt', type: 'text/plain', data: 'hello' }]);
      const up = await app.inject({
        method: 'POST',
        url: `/storage/o/${key()}`,
        payload: mp.payload,
        headers: { ...mp.headers, authorization: `Bearer ${login.json().jwt_token}` },
      });
      assert.equal(up.statusCode, 200, up.body);
      return up.json().Metadata.token as string;
    });
  });
  after(() => g?.close());

  describe('check', () => {
    it('accepts a valid file and refuses a broken one with its file, line and problem', async () => {
      const dir = path.join(g.dataDir, 'rules');
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'good.yaml'), "paths:\n  /docs/:name:\n    read: 'true'\n");
      writeFileSync(
        path.join(dir, 'bad.yaml'),
        "functions:\n  ok: 'return true'\npaths:\n  /docs/:name:\n    read: 'ok() && nmae.length > 0'\n",
      );
      const good = await g.gatehouse('rules', 'check', 'rules/good.yaml');
      assert.equal(good.code, 0, good.err);
      assert.equal(good.out, 'rules/good.yaml: valid\n');
      // The real bin: the exit code and stderr as a script or an editor sees them.
      const bad = await g.bin('', 'rules', 'check', 'rules/bad.yaml');
      assert.equal(bad.code, 1);
      assert.equal(
        bad.err,
        'rules/bad.yaml:5: path "/docs/:name" rule "read": "nmae" is not defined (use request, resource or a path variable)\n',
      );
      assert.doesNotMatch(bad.err, /\n\s+at /);
      const missing = await g.gatehouse('rules', 'check', 'rules/none.yaml');
      assert.equal(missing.code, 1);
      assert.match(missing.err, /rules\/none\.yaml does not exist/);
      const configured = await g.gatehouse('rules', 'check');
      assert.equal(configured.code, 0);
      assert.match(configured.out, /does not exist: the service uses the built-in default rules/);
    });
  });

  describe("explain on HBP's default rules", () => {
    it("explains a denial by the failing expressions: not the owner, and a token that is not the file's", async () => {
      const res = await g.gatehouse(
        'rules',
        'explain',
        'GET',
        `/storage/o/${key()}`,
        '--claims',
        JSON.stringify({ 'x-hasura-user-id': '00000000-0000-4000-8000-000000000000' }),
        '--token',
        'not-the-token',
      );
      assert.equal(res.code, 3, res.err);
      const lines = explanationOf(res.out);
      assert.deepEqual(lines.slice(0, 4), [
        `operation: get on /${key()} (rules tried: get, then read)`,
        'path "/user/:userId/": does not match',
        `path "/user/:userId/:fileId": matches (userId = "${ownerId}", fileId = "notes.txt")`,
        '  read: isOwner(userId) || validToken()  →  false',
      ]);
      assert.ok(lines.includes('      isOwner(userId) = false'), res.out);
      assert.ok(
        lines.includes(`            request.auth['user-id'] = "00000000-0000-4000-8000-000000000000"`),
        res.out,
      );
      assert.ok(lines.includes('      validToken() = false'), res.out);
      assert.ok(lines.includes('        request.query.token === resource.Metadata.token = false'), res.out);
      assert.ok(lines.includes('          request.query.token = [another token]'), res.out);
      assert.ok(lines.includes("          resource.Metadata.token = [the file's token]"), res.out);
      assert.equal(lines.at(-1), 'decision: DENIED: /user/:userId/:fileId: no rule allows get');
      assert.ok(!res.out.includes(fileToken), 'the file token is never printed');
    });

    it("allows the owner (claims read from the database) and the file's own token", async () => {
      const owner = await g.gatehouse('rules', 'explain', 'GET', `/${key()}`, '--user', 'owner@example.com');
      assert.equal(owner.code, 0, owner.err);
      assert.match(owner.out, new RegExp(`caller: claims \\{"user-id":"${ownerId}"`));
      assert.match(owner.out, /\n {6}isOwner\(userId\) = true\n/);
      assert.match(owner.out, /\ndecision: ALLOWED\n$/);
      const token = await g.gatehouse('rules', 'explain', 'GET', `/${key()}`, '--token', fileToken);
      assert.equal(token.code, 0, token.err);
      assert.match(token.out, /\n {8}request\.query\.token === resource\.Metadata\.token = true\n/);
      assert.ok(!token.out.includes(fileToken));
      const nobody = await g.gatehouse(
        'rules',
        'explain',
        'GET',
        `/${key()}`,
        '--user',
        'nobody@example.com',
      );
      assert.equal(nobody.code, 1);
      assert.equal(nobody.err, 'no account has the email "nobody@example.com"\n');
    });
  });

  describe('explain on a custom rules file', () => {
    it('shows the sub-expression that failed, for an upload and a listing', async () => {
      const file = path.join(g.dataDir, 'rules', 'custom.yaml');
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(
        file,
        [
          'functions:',
          "  isEditor: \"return !!request.auth && request.auth['default-role'] === 'editor'\"",
          'paths:',
          '  /docs/:name:',
          "    read: 'true'",
          '    create: \'isEditor() && resource.size < 1000 && resource.mimetype.startsWith("text/")\'',
          '  /docs/:',
          "    list: 'request.auth != null'",
          '',
        ].join('\n'),
      );
      const editor = JSON.stringify({ 'x-hasura-user-id': ownerId, 'x-hasura-default-role': 'editor' });
      const big = await g.gatehouse(
        'rules',
        'explain',
        'POST',
        '/storage/o/docs/a.txt',
        '--rules',
        'rules/custom.yaml',
        '--claims',
        editor,
        '--size',
        '5000',
        '--type',
        'text/plain',
      );
      assert.equal(big.code, 3, big.err);
      const lines = explanationOf(big.out);
      assert.equal(lines[0], 'operation: create on /docs/a.txt (rules tried: create, then write)');
      assert.ok(lines.includes('        isEditor() = true'), big.out);
      assert.ok(lines.includes('        resource.size < 1000 = false'), big.out);
      assert.ok(lines.includes('          resource.size = 5000'), big.out);
      assert.ok(
        !lines.some((l) => /^ {6,}resource\.mimetype/.test(l)),
        'a short-circuited operand is not evaluated',
      );
      assert.equal(lines.at(-1), 'decision: DENIED: /docs/:name: no rule allows create');
      const list = await g.gatehouse(
        'rules',
        'explain',
        'GET',
        '/docs/',
        '--rules',
        'rules/custom.yaml',
        '--anonymous',
      );
      assert.equal(list.code, 3);
      assert.deepEqual(explanationOf(list.out), [
        'operation: list on /docs/ (rules tried: list, then read)',
        'path "/docs/:name": does not match',
        'path "/docs/": matches',
        '  list: request.auth != null  →  false',
        '    request.auth != null = false',
        '      request.auth = undefined',
        'decision: DENIED: /docs/: no rule allows list',
      ]);
      const usage = await g.gatehouse('rules', 'explain', 'FETCH', '/docs/');
      assert.equal(usage.code, 2);
      assert.match(usage.err, /METHOD must be one of GET, HEAD, POST, PUT, DELETE/);
    });
  });

  describe('the service log', () => {
    it('logs the same trace at debug level for a refused request, in one line, without the file tokens', async () => {
      const lines: string[] = [];
      const sink = new Writable({
        write(chunk, _enc, cb) {
          lines.push(
            ...String(chunk)
              .split('\n')
              .filter((l) => l !== ''),
          );
          cb();
        },
      });
      const log = pino({ level: 'debug' }, sink) as unknown as FastifyBaseLogger;
      const status = await g.withService(async (_ctx, app) => {
        const res = await app.inject({ method: 'GET', url: `/storage/o/${key()}?token=not-the-token` });
        return res.statusCode;
      }, log);
      assert.equal(status, 403);
      const refusals = lines
        .map((l) => JSON.parse(l) as { msg: string; level: number; storageRules?: { trace: string[] } })
        .filter((l) => l.msg === 'storage request refused by the rules');
      assert.equal(refusals.length, 1);
      assert.equal(refusals[0]?.level, 20, 'debug');
      const cli = await g.gatehouse(
        'rules',
        'explain',
        'GET',
        `/storage/o/${key()}`,
        '--token',
        'not-the-token',
      );
      assert.equal(cli.code, 3, cli.err);
      assert.deepEqual(refusals[0]?.storageRules?.trace, explanationOf(cli.out));
      const line = JSON.stringify(refusals[0]);
      assert.ok(!line.includes(fileToken), "the file's token is not in the line");
      assert.ok(!line.includes('not-the-token'), 'nor is the token sent');
    });
  });
});
