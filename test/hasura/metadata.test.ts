import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { applyHasuraMetadata, queryEndpoint } from '../../src/hasura/metadata.ts';
import { tempDir } from '../helpers/app.ts';
import { killIfRunning, REPO_ROOT, runNode, type ServiceProcess } from '../helpers/process.ts';

const log = pino({ level: 'silent' });

interface Received {
  url: string;
  secret: string | undefined;
  body: { type: string; args: Record<string, unknown> };
}

async function readJson(req: IncomingMessage): Promise<Received['body']> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

describe('Hasura metadata at start (contract 10.4)', () => {
  let server: Server;
  let base: string;
  const received: Received[] = [];
  const tracked = new Set<string>(['public.users']); // as if an earlier start had tracked it

  before(async () => {
    server = createServer(async (req, res) => {
      const body = await readJson(req);
      received.push({ url: req.url ?? '', secret: req.headers['x-hasura-admin-secret'] as string, body });
      const t = body.args.table as { schema: string; name: string } | undefined;
      const key = body.type === 'track_table' ? `${body.args.schema}.${body.args.name}` : '';
      if (body.type === 'track_table' && tracked.has(key)) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 'already-tracked', error: `view/table already tracked: "${key}"` }));
        return;
      }
      if (body.type === 'track_table') tracked.add(key);
      if (t && !tracked.has(`${t.schema}.${t.name}`)) {
        res.writeHead(400).end('{"code":"not-exists"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"message":"success"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it('posts to /v1/query with the admin secret: 10 tables (storage.files too), then their relationships and the feed permission', async () => {
    const result = await applyHasuraMetadata(
      { endpoint: `${base}/v1/graphql`, adminSecret: 'the-secret' },
      log,
    );
    assert.ok(received.every((r) => r.url === '/v1/query' && r.secret === 'the-secret'));
    const tables = received
      .filter((r) => r.body.type === 'track_table')
      .map((r) => `${r.body.args.schema}.${r.body.args.name}`);
    assert.deepEqual(tables.sort(), [
      'auth.account_providers',
      'auth.account_roles',
      'auth.accounts',
      'auth.migrations',
      'auth.providers',
      'auth.refresh_tokens',
      'auth.roles',
      'auth.security_events',
      'public.users',
      'storage.files',
    ]);
    const firstRelationship = received.findIndex((r) => r.body.type !== 'track_table');
    assert.equal(firstRelationship, 10, 'every table is tracked before any relationship');
    const rel = (name: string, schema: string, table: string) =>
      received.find((r) => {
        const t = r.body.args.table as { schema: string; name: string } | undefined;
        return r.body.args.name === name && t?.schema === schema && t.name === table;
      })?.body;
    assert.deepEqual(rel('user', 'auth', 'accounts'), {
      type: 'create_object_relationship',
      args: {
        table: { schema: 'auth', name: 'accounts' },
        name: 'user',
        using: { foreign_key_constraint_on: 'user_id' },
      },
    });
    assert.deepEqual(rel('account', 'public', 'users')?.args.using, {
      manual_configuration: {
        remote_table: { schema: 'auth', name: 'accounts' },
        column_mapping: { id: 'user_id' },
      },
    });
    assert.deepEqual(rel('accounts', 'auth', 'roles'), {
      type: 'create_array_relationship',
      args: {
        table: { schema: 'auth', name: 'roles' },
        name: 'accounts',
        using: {
          foreign_key_constraint_on: { table: { schema: 'auth', name: 'accounts' }, column: 'default_role' },
        },
      },
    });
    // A file's uploader, and a user's files.
    assert.deepEqual(rel('owner', 'storage', 'files')?.args.using, { foreign_key_constraint_on: 'owner_id' });
    assert.deepEqual(rel('files', 'public', 'users'), {
      type: 'create_array_relationship',
      args: {
        table: { schema: 'public', name: 'users' },
        name: 'files',
        using: {
          foreign_key_constraint_on: { table: { schema: 'storage', name: 'files' }, column: 'owner_id' },
        },
      },
    });
    assert.equal(received.filter((r) => r.body.type === 'create_object_relationship').length, 10);
    assert.equal(received.filter((r) => r.body.type === 'create_array_relationship').length, 8);
    // The security feed: a user reads their own account's events only.
    assert.deepEqual(received.at(-1)?.body, {
      type: 'create_select_permission',
      args: {
        table: { schema: 'auth', name: 'security_events' },
        role: 'user',
        permission: {
          columns: ['id', 'type', 'created_at', 'ip', 'user_agent', 'session_id', 'details'],
          filter: { account: { user_id: { _eq: 'X-Hasura-User-Id' } } },
        },
      },
    });
    // public.users was "already tracked": that call failed, the others went on.
    assert.deepEqual(result, { accepted: received.length - 1, failed: 1 });
  });

  it('never rejects when the engine is unreachable, and sends no secret header when none is set', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const result = await applyHasuraMetadata(
      { endpoint: `http://127.0.0.1:${port}/v1/graphql`, adminSecret: '' },
      log,
    );
    assert.deepEqual(result, { accepted: 0, failed: 29 });
    const before = received.length;
    await applyHasuraMetadata({ endpoint: `${base}/v1/graphql`, adminSecret: '' }, log);
    assert.ok(received.slice(before).every((r) => r.secret === undefined));
  });

  it('derives the query endpoint the way HBP did', () => {
    assert.equal(queryEndpoint('http://hasura:8080/v1/graphql'), 'http://hasura:8080/v1/query');
  });
});

describe('the service process with HASURA_ENDPOINT', () => {
  const dataDir = tempDir('gatehouse-hasura-');
  let running: ServiceProcess | undefined;
  let engine: Server;
  const calls: string[] = [];
  after(async () => {
    killIfRunning(running);
    await new Promise<void>((r) => engine.close(() => r()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('tracks the tables at start, in the background, with the admin secret', async () => {
    let done: () => void = () => {};
    const allCalls = new Promise<void>((r) => {
      done = r;
    });
    engine = createServer(async (req, res) => {
      const body = await readJson(req);
      calls.push(`${req.url} ${req.headers['x-hasura-admin-secret']} ${body.type}`);
      res.writeHead(200).end('{"message":"success"}');
      if (calls.length === 29) done();
    });
    await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
    const port = (engine.address() as AddressInfo).port;
    running = runNode(path.join(REPO_ROOT, 'src/main.ts'), {
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      HASURA_ENDPOINT: `http://127.0.0.1:${port}/v1/graphql`,
      HASURA_GRAPHQL_ADMIN_SECRET: 'engine-secret',
    });
    await running.listening;
    await allCalls;
    assert.equal(calls.length, 29);
    assert.ok(calls.every((c) => c.startsWith('/v1/query engine-secret ')));
    assert.equal(calls.filter((c) => c.endsWith(' track_table')).length, 10);
  });
});
