/**
 * `gatehouse keys`: the access-token signing keys. `list` shows the current key, the retired ones and
 * where a rotation stands; `generate` makes a private key; `rotate` replaces the signing key so that no
 * token and no verifier notices (see docs/auth.md, "Key rotation"): the new key is published beside the old,
 * the old one keeps signing until verifiers' cached JWKS (JWKS_MAX_AGE) must have picked up the new one,
 * and it is dropped once the tokens it signed have expired (JWT_EXPIRES_IN).
 */
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  generatePrivateKeyPem,
  keyFiles,
  kidOf,
  loadJwtKeys,
  readRotatedAt,
  signingKeyAt,
  verifyingKeysAt,
} from '../../auth/keys.ts';
import { type Config, JWT_ALGORITHMS, type JwtAlgorithm } from '../../config.ts';
import { type CliIO, type Command, configOf, parseOptions, subcommands, UsageError } from '../command.ts';

/** Writes `text` to `file` atomically (a temporary file renamed over it), readable by its owner only. */
function writeSecretFile(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text.endsWith('\n') ? text : `${text}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

const rotationEnds = (c: Config, at: Date) =>
  new Date(at.getTime() + c.JWKS_MAX_AGE * 1000 + c.JWT_EXPIRES_IN * 60_000);

const list = {
  summary: 'Show the signing key, the retired keys still accepted, and where a rotation stands',
  help: `Usage: gatehouse keys list

Prints the key that signs now, every key /auth/jwks publishes (by kid), and the instants at which a
rotation in progress moves on. Nothing is written (outside production a first key is generated, as the
service would).`,
  async run(args: string[], io: CliIO) {
    parseOptions(args, {});
    const c = configOf(io);
    const now = io.now();
    const keys = await loadJwtKeys(c, { now, readOnly: true });
    io.out(`algorithm: ${keys.algorithm}\nsource:    ${keys.source}\n`);
    if (!keys.kid) {
      io.out('a shared secret: nothing is published, and rotation is not available\n');
      return 0;
    }
    const signing = signingKeyAt(keys, now).kid;
    for (const k of verifyingKeysAt(keys, now)) {
      const role = k.kid === keys.kid ? 'current' : 'retired';
      io.out(`${k.kid === signing ? 'signs    ' : 'verifies '} ${k.kid} (${role})\n`);
    }
    const dropped = keys.previous.filter((p) => !verifyingKeysAt(keys, now).some((k) => k.kid === p.kid));
    for (const k of dropped) io.out(`dropped   ${k.kid} (retired; its tokens have all expired)\n`);
    if (keys.previousSignsUntil && now < keys.previousSignsUntil)
      io.out(`the current key signs from ${keys.previousSignsUntil.toISOString()} on\n`);
    if (keys.previousUntil && now < keys.previousUntil)
      io.out(`retired keys are accepted until ${keys.previousUntil.toISOString()}\n`);
    if (keys.previous.length > 0 && !keys.previousUntil)
      io.out(
        c.JWT_KEY
          ? 'retired keys are accepted until JWT_PREVIOUS_KEY is removed (JWT_KEY_ROTATED_AT is not set)\n'
          : 'the rotation has not been loaded by an instance yet: the first to start records its time\n',
      );
    return 0;
  },
};

const generate = {
  summary: 'Print a new PEM private key (or write it with --out)',
  help: `Usage: gatehouse keys generate [--algorithm RS256] [--out FILE]

Makes a private key for JWT_ALGORITHM (or --algorithm: ${JWT_ALGORITHMS.filter((a) => !a.startsWith('HS')).join(', ')})
and prints it, or writes it to FILE (mode 0600; an existing file is not replaced). Use it as JWT_KEY, or
as HBP's custom/keys/private.pem.`,
  async run(args: string[], io: CliIO) {
    const { values } = parseOptions(args, { values: ['algorithm', 'out'] });
    const alg = (values['algorithm'] ?? configOf(io).JWT_ALGORITHM) as JwtAlgorithm;
    if (!JWT_ALGORITHMS.includes(alg))
      throw new UsageError(`--algorithm must be one of ${JWT_ALGORITHMS.join(', ')}`);
    if (alg.startsWith('HS'))
      throw new UsageError(
        `${alg} signs with a shared secret, not a key pair: set JWT_KEY to 32 or more random bytes`,
      );
    const pem = generatePrivateKeyPem(alg);
    const out = values['out'];
    if (out === undefined) {
      io.out(`${pem}\n`);
      return 0;
    }
    const file = path.resolve(io.cwd, out);
    if (existsSync(file)) {
      io.err(`${file} exists; not replaced\n`);
      return 1;
    }
    writeSecretFile(file, pem);
    io.err(`wrote a ${alg} private key (kid ${await kidOf(pem)}) to ${file}\n`);
    return 0;
  },
};

const rotate = {
  summary: 'Replace the signing key; the old one stays valid until its tokens have expired',
  help: `Usage: gatehouse keys rotate [--out FILE] [--force]

Keys from files (JWT_KEY unset): writes a new key in place of the key file (HBP's
custom/keys/private.pem, or the generated DATA_DIR/keys/jwt-<alg>.pem) and moves the old one to
<stem>.previous.pem beside it. Restart every instance within JWKS_MAX_AGE seconds of each other: the first
to start records the rotation time in <stem>.rotated-at; from then on /auth/jwks publishes both keys, the
old key keeps signing for JWKS_MAX_AGE seconds (so verifiers fetch the new one first), then the new key
signs, and JWT_EXPIRES_IN minutes later the old key is neither accepted nor published.

Keys from the environment (JWT_KEY set): writes the new key to FILE (--out, required) and prints the
settings to deploy: JWT_KEY (the new key), JWT_PREVIOUS_KEY (the current one) and JWT_KEY_ROTATED_AT.

A rotation whose old key is still accepted is not rotated again (its tokens would fail) unless --force.`,
  async run(args: string[], io: CliIO) {
    const { values, flags } = parseOptions(args, { values: ['out'], flags: ['force'] });
    const c = configOf(io);
    const alg = c.JWT_ALGORITHM;
    if (alg.startsWith('HS')) {
      io.err(
        `JWT_ALGORITHM is ${alg}: a shared secret has no public half to publish beside a new one, so every verifier (Hasura: HASURA_GRAPHQL_JWT_SECRET) must change at the same moment. Move to RS256 (gatehouse keys generate) to rotate without a cut.\n`,
      );
      return 1;
    }
    const now = io.now();
    const pem = generatePrivateKeyPem(alg);
    const newKid = await kidOf(pem);

    if (c.JWT_KEY) {
      if (
        c.JWT_PREVIOUS_KEY &&
        c.JWT_KEY_ROTATED_AT &&
        now < rotationEnds(c, new Date(c.JWT_KEY_ROTATED_AT)) &&
        !flags.has('force')
      ) {
        io.err(
          `the last rotation (JWT_KEY_ROTATED_AT=${c.JWT_KEY_ROTATED_AT}) still accepts its old key until ${rotationEnds(c, new Date(c.JWT_KEY_ROTATED_AT)).toISOString()}; rotate after that, or use --force\n`,
        );
        return 1;
      }
      const out = values['out'];
      if (out === undefined)
        throw new UsageError(
          'JWT_KEY comes from the environment: give --out FILE for the new key (it is not printed)',
        );
      const file = path.resolve(io.cwd, out);
      if (existsSync(file)) {
        io.err(`${file} exists; not replaced\n`);
        return 1;
      }
      writeSecretFile(file, pem);
      io.out(
        [
          `New ${alg} key (kid ${newKid}) written to ${file}.`,
          'Deploy every instance with:',
          `  JWT_KEY=<the contents of ${file}>`,
          '  JWT_PREVIOUS_KEY=<the current JWT_KEY>   (a private key: it signs until the new key is published long enough)',
          `  JWT_KEY_ROTATED_AT=<the instant of the deployment, such as ${now.toISOString()}>`,
          `The old key keeps signing for JWKS_MAX_AGE (${c.JWKS_MAX_AGE} s) after JWT_KEY_ROTATED_AT and is accepted for JWT_EXPIRES_IN (${c.JWT_EXPIRES_IN} min) more;`,
          'remove JWT_PREVIOUS_KEY and JWT_KEY_ROTATED_AT at any later deployment.',
          '',
        ].join('\n'),
      );
      return 0;
    }

    const files = keyFiles(c);
    if (!existsSync(files.key)) {
      io.err(
        `there is no key to rotate yet (${files.key} does not exist); start the service once, or run gatehouse keys generate\n`,
      );
      return 1;
    }
    if (existsSync(files.previous) && !flags.has('force')) {
      if (!existsSync(files.rotatedAt)) {
        io.err(
          `the last rotation (${files.previous}) has not been loaded by any instance yet: restart them first, or use --force\n`,
        );
        return 1;
      }
      const ends = rotationEnds(c, new Date(readRotatedAt(files.rotatedAt)));
      if (now < ends) {
        io.err(
          `the last rotation still accepts its old key until ${ends.toISOString()}; rotate after that, or use --force\n`,
        );
        return 1;
      }
    }
    const oldPem = readFileSync(files.key, 'utf8');
    const oldKid = await kidOf(oldPem);
    // The old key first: an interruption between the two writes leaves it both current and previous,
    // which loads as no rotation at all.
    writeSecretFile(files.previous, oldPem);
    rmSync(files.rotatedAt, { force: true });
    writeSecretFile(files.key, pem);
    io.out(
      [
        `Rotated ${files.key}: new key ${newKid}; the old key ${oldKid} is in ${files.previous}.`,
        `Restart every instance within ${c.JWKS_MAX_AGE} s of each other (keys are read at start). The first to start`,
        `records the time in ${files.rotatedAt}; the old key keeps signing for ${c.JWKS_MAX_AGE} s while /auth/jwks publishes both,`,
        `then the new key signs, and ${c.JWT_EXPIRES_IN} min later the old key is no longer accepted.`,
        '',
      ].join('\n'),
    );
    return 0;
  },
};

const keys: Command = {
  name: 'keys',
  summary: 'Access-token signing keys: list, generate, rotate',
  help: `Usage: gatehouse keys <list|generate|rotate> [options]

  list      ${list.summary}
  generate  ${generate.summary}
  rotate    ${rotate.summary}

Run gatehouse keys <subcommand> --help for its options.`,
  run: subcommands('keys', { list, generate, rotate }),
};

export default keys;
