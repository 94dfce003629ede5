import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, configFrom, describeSettings, loadConfig, readEnv } from './config.ts';

/** The problems loadConfig reports for `env` (fails the test when it accepts it). */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  assert.fail(`expected a ConfigError for ${JSON.stringify(env)}`);
}

const PRODUCTION_OK = {
  NODE_ENV: 'production',
  DATABASE_URL: 'postgres://gatehouse@db:5432/app',
  COOKIE_SECRET: 'c'.repeat(32),
  MFA_ENCRYPTION_KEY: 'm'.repeat(32),
  JWT_ALGORITHM: 'HS256',
  JWT_KEY: 'k'.repeat(32),
};

describe('loadConfig', () => {
  it('gives HBP defaults when the environment is empty', () => {
    const c = loadConfig({});
    assert.equal(c.PORT, 3000);
    assert.equal(c.JWT_ALGORITHM, 'RS256');
    assert.equal(c.JWT_EXPIRES_IN, 15);
    assert.equal(c.JWT_REFRESH_EXPIRES_IN, 43200);
    assert.equal(c.JWT_CLAIMS_NAMESPACE, 'https://hasura.io/jwt/claims');
    assert.equal(c.AUTH_ENABLED, true);
    assert.equal(c.MFA_ENABLED, true);
    assert.equal(c.LOST_PASSWORD_ENABLED, false);
    assert.equal(c.AUTO_ACTIVATE_NEW_USERS, true);
    assert.equal(c.MIN_PASSWORD_LENGTH, 8, "a newcomer does not get HBP's 3");
    assert.equal(c.DEFAULT_USER_ROLE, 'user');
    assert.equal(c.COOKIE_SAME_SITE, 'lax');
    assert.equal(c.SMTP_PORT, 587);
    assert.equal(c.DATA_DIR, './data');
    assert.equal(c.DATABASE_URL, '');
    assert.equal(c.isProduction, false);
  });

  it('returns a frozen object', () => {
    const c = loadConfig({});
    assert.ok(Object.isFrozen(c));
    assert.throws(() => {
      (c as { PORT: number }).PORT = 1;
    }, TypeError);
  });

  it('reads the legacy *_ENABLE alias when the new name is unset', () => {
    const c = loadConfig({ AUTH_ENABLE: 'false', LOST_PASSWORD_ENABLE: 'true', STORAGE_ENABLE: 'FALSE' });
    assert.equal(c.AUTH_ENABLED, false);
    assert.equal(c.LOST_PASSWORD_ENABLED, true);
    assert.equal(c.STORAGE_ENABLED, false);
  });

  it('accepts an alias that repeats the same value in another spelling', () => {
    const c = loadConfig({
      AUTH_ENABLE: 'true',
      AUTH_ENABLED: 'TRUE',
      MFA_ENABLE: '0',
      MFA_ENABLED: 'false',
    });
    assert.equal(c.AUTH_ENABLED, true);
    assert.equal(c.MFA_ENABLED, false);
  });

  it('refuses an alias that contradicts the new name, naming both', () => {
    assert.deepEqual(problems({ AUTH_ENABLE: 'false', AUTH_ENABLED: 'true' }), [
      'AUTH_ENABLED and AUTH_ENABLE are both set, to different values; set only AUTH_ENABLED',
    ]);
  });

  it('treats an empty value as unset', () => {
    const c = loadConfig({ PORT: '', AUTH_ENABLED: '', JWT_ALGORITHM: '' });
    assert.equal(c.PORT, 3000);
    assert.equal(c.AUTH_ENABLED, true);
    assert.equal(c.JWT_ALGORITHM, 'RS256');
  });

  it('parses booleans as true/false, 1/0, yes/no, on/off in any case, and refuses anything else', () => {
    for (const [raw, value] of [
      ['true', true],
      ['TRUE', true],
      ['1', true],
      ['yes', true],
      [' on ', true],
      ['false', false],
      ['False', false],
      ['0', false],
      ['no', false],
      ['off', false],
    ] as const) {
      assert.equal(loadConfig({ VERIFY_EMAILS: raw }).VERIFY_EMAILS, value, raw);
    }
    assert.deepEqual(problems({ VERIFY_EMAILS: 'ture' }), [
      'VERIFY_EMAILS must be true or false, got "ture"',
    ]);
  });

  it('refuses integers with trailing text or out of range instead of guessing (HBP read "15abc" as 15)', () => {
    assert.deepEqual(problems({ JWT_EXPIRES_IN: '15abc' }), [
      'JWT_EXPIRES_IN must be a whole number, got "15abc"',
    ]);
    assert.deepEqual(problems({ PORT: '70000' }), ['PORT must be at most 65535, got 70000']);
    assert.deepEqual(problems({ MIN_PASSWORD_LENGTH: '0' }), [
      'MIN_PASSWORD_LENGTH must be at least 1, got 0',
    ]);
    assert.equal(loadConfig({ PORT: ' 8080 ' }).PORT, 8080);
  });

  it('splits lists on commas, trimming items and dropping empty ones', () => {
    const c = loadConfig({
      ALLOWED_USER_ROLES: ' user , editor,,admin ',
      DEFAULT_ALLOWED_USER_ROLES: 'user',
    });
    assert.deepEqual(c.ALLOWED_USER_ROLES, ['user', 'editor', 'admin']);
  });

  it('parses byte sizes with binary units, and refuses other text', () => {
    for (const [raw, value] of [
      ['2048', 2048],
      ['512k', 512 * 1024],
      ['512KB', 512 * 1024],
      ['100 MiB', 100 * 1024 ** 2],
      ['1GB', 1024 ** 3],
    ] as const) {
      assert.equal(loadConfig({ BODY_LIMIT: raw }).BODY_LIMIT, value, raw);
    }
    assert.deepEqual(problems({ BODY_LIMIT: '1.5MB' }), [
      'BODY_LIMIT must be a size such as 1048576, 512KB or 1GiB, got "1.5MB"',
    ]);
    assert.deepEqual(problems({ STORAGE_MAX_UPLOAD_SIZE: '10 parsecs' }), [
      'STORAGE_MAX_UPLOAD_SIZE must be a size such as 1048576, 512KB or 1GiB, got "10 parsecs"',
    ]);
  });

  it('accepts only the listed JWT algorithms, exactly spelled', () => {
    assert.equal(loadConfig({ JWT_ALGORITHM: 'HS512' }).JWT_ALGORITHM, 'HS512');
    assert.match(problems({ JWT_ALGORITHM: 'none' })[0] ?? '', /^JWT_ALGORITHM must be one of HS256, /);
    assert.match(problems({ JWT_ALGORITHM: 'hs256' })[0] ?? '', /^JWT_ALGORITHM must be one of/);
  });

  it('accepts COOKIE_SAME_SITE in any case and returns it lower-case', () => {
    assert.equal(loadConfig({ COOKIE_SAME_SITE: 'Strict' }).COOKIE_SAME_SITE, 'strict');
  });

  it('checks DATABASE_URL and REDIS_URL without echoing them (they carry passwords)', () => {
    const found = problems({
      DATABASE_URL: 'mysql://root:pw@db/app',
      REDIS_URL: 'not a url with secret-pw',
    });
    assert.deepEqual(found, [
      'DATABASE_URL must start with postgres:// or postgresql://',
      'REDIS_URL is not a valid URL',
    ]);
    assert.equal(
      loadConfig({ DATABASE_URL: 'postgresql://u:p@h:5432/d' }).DATABASE_URL,
      'postgresql://u:p@h:5432/d',
    );
  });

  it('lists every problem at once', () => {
    assert.deepEqual(problems({ PORT: 'abc', JWT_ALGORITHM: 'foo', DATABASE_URL: 'notaurl' }), [
      'PORT must be a whole number, got "abc"',
      'DATABASE_URL is not a valid URL',
      'JWT_ALGORITHM must be one of HS256, HS384, HS512, RS256, RS384, RS512, ES256, EdDSA, got "foo"',
    ]);
    const e = new ConfigError(['A is bad', 'B is bad']);
    assert.equal(e.message, 'Invalid configuration:\n  - A is bad\n  - B is bad');
  });

  it('computes defaults from the settings they depend on', () => {
    const c = loadConfig({
      PORT: '4000',
      DEFAULT_USER_ROLE: 'member',
      SMTP_PORT: '465',
      SMTP_USER: 'mailer@x.io',
    });
    assert.equal(c.SERVER_URL, 'http://localhost:4000');
    assert.deepEqual(c.DEFAULT_ALLOWED_USER_ROLES, ['member']);
    assert.deepEqual(c.ALLOWED_USER_ROLES, ['member']);
    assert.equal(c.SMTP_SECURE, true);
    assert.equal(c.SMTP_SENDER, 'mailer@x.io');
    assert.equal(loadConfig({}).SMTP_SECURE, false);
    assert.equal(loadConfig({ CUSTOM_DIR: '/etc/gh' }).EMAIL_TEMPLATES_DIR, path.join('/etc/gh', 'emails'));
  });

  it('lets an explicit value win over a computed default', () => {
    const c = loadConfig({
      PORT: '4000',
      SERVER_URL: 'https://auth.example.com',
      SMTP_PORT: '465',
      SMTP_SECURE: 'false',
    });
    assert.equal(c.SERVER_URL, 'https://auth.example.com');
    assert.equal(c.SMTP_SECURE, false);
  });

  it('refuses default roles that are not allowed, and custom fields that are not plain column names', () => {
    assert.deepEqual(
      problems({
        ALLOWED_USER_ROLES: 'user',
        DEFAULT_ALLOWED_USER_ROLES: 'user,admin',
        JWT_CUSTOM_FIELDS: 'name,"x"; drop table',
      }),
      [
        'DEFAULT_ALLOWED_USER_ROLES contains "admin", which is not in ALLOWED_USER_ROLES',
        'JWT_CUSTOM_FIELDS entry ""x"; drop table" is not a plain lower-case column name',
      ],
    );
  });

  it('refuses CORS_ORIGINS entries that are not origins, above all a bare * (credentials for any site)', () => {
    for (const bad of ['*', 'https://*', 'app.example.com', 'https://app.example.com/path', 'ftp://x.io']) {
      assert.deepEqual(
        problems({ CORS_ORIGINS: bad }),
        [
          `CORS_ORIGINS entry "${bad}" is not an origin such as https://app.example.com, https://*.example.com or http://localhost:*`,
        ],
        bad,
      );
    }
    const c = loadConfig({
      CORS_ORIGINS: 'https://app.example.com, https://*.example.org,http://localhost:*,http://127.0.0.1:8080',
    });
    assert.equal(c.CORS_ORIGINS.length, 4);
  });

  it('refuses ALLOWED_REDIRECT_URLS entries the matcher cannot read, or whose * would cover a whole domain', () => {
    for (const [bad, why] of [
      ['*', 'not an http(s) URL pattern'] as const,
      ['https://*', 'a `*` may stand only below a written-out domain, such as *.example.com'],
      ['https://*.com/*', 'a `*` may stand only below a written-out domain, such as *.example.com'],
      ['https://app.example-*.com', 'a `*` may stand only below a written-out domain, such as *.example.com'],
      ['https://app.example.com/cb?x=*', 'not an http(s) URL pattern'],
    ])
      assert.deepEqual(
        problems({ ALLOWED_REDIRECT_URLS: bad }),
        [
          `ALLOWED_REDIRECT_URLS entry "${bad}" is not a URL pattern such as https://app.example.com, https://*.example.com/auth/* or http://localhost:* (${why})`,
        ],
        bad,
      );
    const c = loadConfig({
      ALLOWED_REDIRECT_URLS: 'https://*.example.com/*, http://localhost:*,https://app.example.org/auth/*',
    });
    assert.equal(c.ALLOWED_REDIRECT_URLS.length, 3);
  });

  it('listens on 127.0.0.1 outside production and on every interface in production', () => {
    assert.equal(loadConfig({}).HOST, '127.0.0.1');
    assert.equal(loadConfig(PRODUCTION_OK).HOST, '0.0.0.0');
    assert.equal(loadConfig({ HOST: '0.0.0.0' }).HOST, '0.0.0.0');
  });

  it('reports the checks across settings and the key problems along with a value that does not parse', () => {
    assert.deepEqual(
      problems({ PORT: 'abc', COOKIE_SAME_SITE: 'none', JWT_ALGORITHM: 'HS512', JWT_KEY: 'short' }),
      [
        'PORT must be a whole number, got "abc"',
        'COOKIE_SAME_SITE=none needs COOKIE_SECURE=true (cookies sent cross-site must be HTTPS-only)',
        'JWT_KEY must be at least 64 bytes long for HS512',
      ],
    );
    // A check about a setting that did not parse is left out: its own problem is already listed.
    assert.deepEqual(problems({ COOKIE_SECURE: 'maybe', COOKIE_SAME_SITE: 'none' }), [
      'COOKIE_SECURE must be true or false, got "maybe"',
    ]);
    assert.deepEqual(problems({ JWT_KEY: 'not a pem' }), ['JWT_KEY is not a valid PEM private key']);
  });

  it('requires S3_BUCKET with S3_ENDPOINT', () => {
    assert.deepEqual(problems({ S3_ENDPOINT: 'minio:9000' }), [
      'S3_BUCKET is required when S3_ENDPOINT is set',
    ]);
  });

  it('refuses development-only settings in production, naming each', () => {
    assert.deepEqual(problems({ NODE_ENV: 'production' }), [
      'DATABASE_URL is required in production (the embedded database is for development)',
      'COOKIE_SECRET is required in production (cookies are always signed)',
      'MFA_ENCRYPTION_KEY is required in production when MFA_ENABLED is true',
      'JWT_KEY (a PEM private key) or the file custom/keys/private.pem is required in production for RS256; `gatehouse keys generate` makes one',
    ]);
    assert.deepEqual(problems({ ...PRODUCTION_OK, JWT_KEY: '' }), [
      'JWT_KEY is required in production for HS256 (a shared secret of at least 32 bytes)',
    ]);
    assert.deepEqual(problems({ ...PRODUCTION_OK, MFA_ENCRYPTION_KEY: '' }), [
      'MFA_ENCRYPTION_KEY is required in production when MFA_ENABLED is true',
    ]);
    const c = loadConfig({ ...PRODUCTION_OK, MFA_ENCRYPTION_KEY: '', MFA_ENABLED: 'false' });
    assert.equal(c.isProduction, true);
  });

  it('changes production defaults: emails off, Secure cookies, no CORS origin, no trusted proxy', () => {
    const c = loadConfig(PRODUCTION_OK);
    assert.equal(c.EMAILS_ENABLED, false);
    assert.equal(c.COOKIE_SECURE, true);
    assert.equal(c.TRUST_PROXY, false);
    assert.deepEqual(c.CORS_ORIGINS, []);
    assert.equal(loadConfig({ ...PRODUCTION_OK, COOKIE_SECURE: 'false' }).COOKIE_SECURE, false);
    const dev = loadConfig({});
    assert.equal(dev.EMAILS_ENABLED, true);
    assert.equal(dev.COOKIE_SECURE, false);
    assert.equal(dev.TRUST_PROXY, false);
  });

  it('stops the start on SameSite=None cookies that are not Secure', () => {
    assert.deepEqual(problems({ COOKIE_SAME_SITE: 'none' }), [
      'COOKIE_SAME_SITE=none needs COOKIE_SECURE=true (cookies sent cross-site must be HTTPS-only)',
    ]);
    assert.deepEqual(problems({ ...PRODUCTION_OK, COOKIE_SAME_SITE: 'None', COOKIE_SECURE: 'false' }), [
      'COOKIE_SAME_SITE=none needs COOKIE_SECURE=true (cookies sent cross-site must be HTTPS-only)',
    ]);
    assert.equal(loadConfig({ ...PRODUCTION_OK, COOKIE_SAME_SITE: 'none' }).COOKIE_SAME_SITE, 'none');
  });

  it('stops a production start on a COOKIE_SECRET or admin secret shorter than 32 characters, naming both', () => {
    assert.deepEqual(
      problems({ ...PRODUCTION_OK, COOKIE_SECRET: 'c'.repeat(31), HASURA_GRAPHQL_ADMIN_SECRET: 'short' }),
      [
        'COOKIE_SECRET must be at least 32 characters in production',
        'HASURA_GRAPHQL_ADMIN_SECRET must be at least 32 characters in production (or empty: no admin bypass)',
      ],
    );
    assert.equal(
      loadConfig({ ...PRODUCTION_OK, HASURA_GRAPHQL_ADMIN_SECRET: 'a'.repeat(32) })
        .HASURA_GRAPHQL_ADMIN_SECRET,
      'a'.repeat(32),
    );
    // Outside production a short secret is a developer's choice.
    assert.equal(
      loadConfig({ COOKIE_SECRET: 'dev', HASURA_GRAPHQL_ADMIN_SECRET: 'dev' }).COOKIE_SECRET,
      'dev',
    );
  });

  it('refuses a JWT custom field whose claim only the service sets, naming the field', () => {
    assert.deepEqual(problems({ JWT_CUSTOM_FIELDS: 'company_id,user_id,default_role,_allowed_roles,role' }), [
      'JWT_CUSTOM_FIELDS entry "user_id" would become the claim x-hasura-user-id, which only the service sets; remove it or use another column',
      'JWT_CUSTOM_FIELDS entry "default_role" would become the claim x-hasura-default-role, which only the service sets; remove it or use another column',
      'JWT_CUSTOM_FIELDS entry "_allowed_roles" would become the claim x-hasura-allowed-roles, which only the service sets; remove it or use another column',
      'JWT_CUSTOM_FIELDS entry "role" would become the claim x-hasura-role, which only the service sets; remove it or use another column',
    ]);
    assert.deepEqual(loadConfig({ JWT_CUSTOM_FIELDS: 'company_id,user_ids' }).JWT_CUSTOM_FIELDS, [
      'company_id',
      'user_ids',
    ]);
  });

  it('reads TRUST_PROXY as a flag, a hop count or proxy addresses and CIDRs, and refuses anything else', () => {
    assert.equal(loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY, true);
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY, 2);
    assert.deepEqual(
      loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.7,loopback, fd00::/8, 172.16.0.0/255.240.0.0' })
        .TRUST_PROXY,
      ['10.0.0.0/8', '192.168.1.7', 'loopback', 'fd00::/8', '172.16.0.0/255.240.0.0'],
    );
    assert.deepEqual(problems({ TRUST_PROXY: '10.0.0.0/33,lb.internal,10.0.0.1' }), [
      `TRUST_PROXY must be false, true, a hop count, or the proxies' addresses or CIDRs (such as 10.0.0.0/8, loopback); "10.0.0.0/33", "lb.internal" is none of these`,
    ]);
    assert.deepEqual(problems({ ...PRODUCTION_OK, TRUST_PROXY: 'true' }), [
      "TRUST_PROXY=true believes X-Forwarded-For from any client, who could then choose its own address for rate limits; list the proxies' addresses or CIDRs instead",
    ]);
  });

  it('accepts the old RATE_LIMIT_LOGIN_EMAIL_* names for the per-account login limits', () => {
    const c = loadConfig({ RATE_LIMIT_LOGIN_EMAIL_MAX: '7', RATE_LIMIT_LOGIN_EMAIL_WINDOW: '1800000' });
    assert.equal(c.RATE_LIMIT_LOGIN_ACCOUNT_MAX, 7);
    assert.equal(c.RATE_LIMIT_LOGIN_ACCOUNT_WINDOW, 1_800_000);
  });

  it('refuses a login failure window no longer than the longest wait', () => {
    assert.deepEqual(problems({ RATE_LIMIT_LOGIN_ACCOUNT_WINDOW: '900000' }), [
      'RATE_LIMIT_LOGIN_ACCOUNT_WINDOW must be longer than RATE_LIMIT_LOGIN_DELAY_MAX (failures would be forgotten during the longest wait)',
    ]);
  });

  it('ignores variables it does not know (the environment holds much else)', () => {
    assert.equal(loadConfig({ HOME: '/root', SOMETHING_ELSE: 'x' }).PORT, 3000);
  });
});

describe('the settings table', () => {
  // Every variable the spec and contract §9.2 name (HBP's HASURA_GRAPHQL_JWT_SECRET belongs to Hasura).
  const NAMED = `HOST PORT SERVER_URL REDIRECT_URL_SUCCESS REDIRECT_URL_ERROR HASURA_ENDPOINT
    HASURA_GRAPHQL_ADMIN_SECRET DATABASE_URL MAX_REQUESTS TIME_FRAME NODE_ENV ALLOWED_REDIRECT_URLS
    AUTH_ENABLED AUTH_LOCAL_USERS_ENABLED CHANGE_EMAIL_ENABLED NOTIFY_EMAIL_CHANGE ANONYMOUS_USERS_ENABLED
    ALLOW_USER_SELF_DELETE VERIFY_EMAILS LOST_PASSWORD_ENABLED USER_IMPERSONATION_ENABLED MAGIC_LINK_ENABLED
    MFA_ENABLED OTP_ISSUER ALLOWED_EMAIL_DOMAINS DEFAULT_USER_ROLE DEFAULT_ANONYMOUS_ROLE AUTO_ACTIVATE_NEW_USERS
    HIBP_ENABLED REGISTRATION_CUSTOM_FIELDS MIN_PASSWORD_LENGTH DEFAULT_ALLOWED_USER_ROLES ALLOWED_USER_ROLES
    JWT_KEY JWT_ALGORITHM JWT_CLAIMS_NAMESPACE JWT_EXPIRES_IN JWT_REFRESH_EXPIRES_IN JWT_CUSTOM_FIELDS
    COOKIE_SECRET COOKIE_SECURE COOKIE_SAME_SITE STORAGE_ENABLED S3_ENDPOINT S3_SSL_ENABLED S3_BUCKET
    S3_ACCESS_KEY_ID S3_SECRET_ACCESS_KEY EMAILS_ENABLED SMTP_HOST SMTP_PORT SMTP_USER SMTP_PASS SMTP_SENDER
    SMTP_AUTH_METHOD SMTP_SECURE PROVIDER_SUCCESS_REDIRECT PROVIDER_FAILURE_REDIRECT GITHUB_ENABLED
    GITHUB_CLIENT_ID GITHUB_CLIENT_SECRET GITHUB_AUTHORIZATION_URL GITHUB_TOKEN_URL GITHUB_USER_PROFILE_URL
    GOOGLE_ENABLED GOOGLE_CLIENT_ID GOOGLE_CLIENT_SECRET FACEBOOK_ENABLED FACEBOOK_CLIENT_ID
    FACEBOOK_CLIENT_SECRET LINKEDIN_ENABLED LINKEDIN_CLIENT_ID LINKEDIN_CLIENT_SECRET SPOTIFY_ENABLED
    SPOTIFY_CLIENT_ID SPOTIFY_CLIENT_SECRET WINDOWS_LIVE_ENABLED WINDOWS_LIVE_CLIENT_ID
    WINDOWS_LIVE_CLIENT_SECRET TWITTER_ENABLED TWITTER_CONSUMER_KEY TWITTER_CONSUMER_SECRET APPLE_ENABLED
    APPLE_CLIENT_ID APPLE_TEAM_ID APPLE_KEY_ID APPLE_PRIVATE_KEY DATA_DIR REDIS_URL LOG_LEVEL`.split(/\s+/);
  const LEGACY =
    `AUTH AUTH_LOCAL_USERS CHANGE_EMAIL ANONYMOUS_USERS LOST_PASSWORD USER_IMPERSONATION MAGIC_LINK
    MFA HIBP STORAGE S3_SSL EMAILS`.split(/\s+/);

  it('has every setting the spec and the HBP contract name', () => {
    const names = new Set(describeSettings().map((r) => r.name));
    assert.deepEqual(
      NAMED.filter((n) => !names.has(n)),
      [],
    );
  });

  it('accepts the legacy *_ENABLE spelling of every HBP flag', () => {
    const rows = new Map(describeSettings().map((r) => [r.name, r.aliases]));
    for (const base of LEGACY) assert.deepEqual(rows.get(`${base}_ENABLED`), [`${base}_ENABLE`], base);
  });
});

describe('configFrom', () => {
  it('takes typed values without the environment, and refuses unknown names', () => {
    assert.equal(configFrom({ PORT: 1234 }).PORT, 1234);
    assert.throws(
      () => configFrom({ NOPE: 1 } as unknown as Parameters<typeof configFrom>[0]),
      /unknown setting NOPE/,
    );
  });
});

describe('readEnv', () => {
  const dir = () => mkdtempSync(path.join(tmpdir(), 'gatehouse-env-'));

  it('reads .env under the real environment, which wins', () => {
    const d = dir();
    try {
      writeFileSync(path.join(d, '.env'), 'PORT=4000\nJWT_ALGORITHM=HS256\n');
      const env = readEnv({ PORT: '5000' }, d);
      assert.equal(env['PORT'], '5000');
      assert.equal(env['JWT_ALGORITHM'], 'HS256');
    } finally {
      rmSync(d, { recursive: true });
    }
  });

  it('lays .env.<NODE_ENV> over .env', () => {
    const d = dir();
    try {
      writeFileSync(path.join(d, '.env'), 'PORT=4000\nLOG_LEVEL=warn\n');
      writeFileSync(path.join(d, '.env.staging'), 'PORT=4100\n');
      const env = readEnv({ NODE_ENV: 'staging' }, d);
      assert.equal(env['PORT'], '4100');
      assert.equal(env['LOG_LEVEL'], 'warn');
    } finally {
      rmSync(d, { recursive: true });
    }
  });

  it('works without any file', () => {
    const d = dir();
    try {
      assert.deepEqual(readEnv({ A: '1' }, d), { A: '1' });
    } finally {
      rmSync(d, { recursive: true });
    }
  });
});

describe('describeSettings', () => {
  it('documents every setting, hides secret defaults, and names the aliases', () => {
    const rows = describeSettings();
    assert.ok(rows.length > 50);
    for (const r of rows) assert.ok(r.doc.length > 0, `${r.name} has documentation`);
    const auth = rows.find((r) => r.name === 'AUTH_ENABLED');
    assert.deepEqual(auth?.aliases, ['AUTH_ENABLE']);
    assert.equal(rows.find((r) => r.name === 'SERVER_URL')?.default, 'http://localhost:3000');
  });
});
