/**
 * The two pages the authorization server shows: the consent form and the error page (a request that
 * cannot be answered at its redirect URI). Plain HTML with no script, served with a CSP that allows
 * the form to post only here and the redirect after it only to the client's redirect URI.
 */
import type { AuthorizationRequest } from './authorize.ts';

const esc = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}' +
  'h1{font-size:1.3rem}code{background:#f2f2f2;padding:0 .2rem}ul{padding-left:1.2rem}' +
  'button{font-size:1rem;padding:.5rem 1.2rem;margin-right:.6rem}.muted{color:#666;font-size:.9rem}';

const SCOPE_WORDS: Record<string, string> = {
  openid: 'know who you are (your account id)',
  profile: 'see your name and picture',
  email: 'see your email address',
  offline_access: 'stay connected when you are away',
  graphql: 'read and change your data through the GraphQL API, as you',
};

/** The CSP of a page whose form posts here and may then be redirected to `redirectUri`'s origin. */
export function pageCsp(redirectUri?: string): string {
  let target = '';
  if (redirectUri) {
    try {
      const u = new URL(redirectUri);
      // Browsers check form-action against the redirect that follows the post, too.
      target = u.protocol === 'http:' || u.protocol === 'https:' ? ` ${u.origin}` : ` ${u.protocol}`;
    } catch {
      target = '';
    }
  }
  return `default-src 'none'; style-src 'unsafe-inline'; img-src https:; form-action 'self'${target}; frame-ancestors 'none'; base-uri 'none'`;
}

function hidden(name: string, value: string | undefined): string {
  return value === undefined ? '' : `<input type="hidden" name="${esc(name)}" value="${esc(value)}">`;
}

export function consentPage(r: AuthorizationRequest, csrf: string, action: string): string {
  const host = (() => {
    try {
      const u = new URL(r.redirectUri);
      return u.host || u.protocol;
    } catch {
      return r.redirectUri;
    }
  })();
  const scopes = r.scopes.length
    ? `<ul>${r.scopes.map((s) => `<li>${esc(SCOPE_WORDS[s] ?? s)} <span class="muted">(<code>${esc(s)}</code>)</span></li>`).join('')}</ul>`
    : '<p>Nothing beyond signing you in.</p>';
  const resources = r.resources.length
    ? `<p>For use at:</p><ul>${r.resources.map((x) => `<li><code>${esc(x)}</code></li>`).join('')}</ul>`
    : '';
  const origin =
    r.client.kind === 'metadata-document'
      ? `<p class="muted">The application describes itself at <code>${esc(r.client.id)}</code>.</p>`
      : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Allow ${esc(r.client.name)}?</title><style>${STYLE}</style></head>
<body><main>
<h1><strong>${esc(r.client.name)}</strong> wants to use your account</h1>
${origin}
<p>It will be sent back to <strong>${esc(host)}</strong>. It asks to:</p>
${scopes}
${resources}
<form method="post" action="${esc(action)}">
${hidden('csrf_token', csrf)}
${hidden('client_id', r.client.id)}
${hidden('redirect_uri', r.redirectUri)}
${hidden('scope', r.scopes.join(' '))}
${r.resources.map((x) => hidden('resource', x)).join('\n')}
${hidden('state', r.state)}
${hidden('code_challenge', r.codeChallenge)}
${hidden('code_challenge_method', 'S256')}
${hidden('nonce', r.nonce)}
${hidden('response_type', 'code')}
<button type="submit" name="decision" value="allow" id="allow">Allow</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
<p class="muted">You can withdraw this later from your account's connected applications.</p>
</main></body></html>`;
}

export function errorPage(message: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization request refused</title><style>${STYLE}</style></head>
<body><main><h1>This sign-in request cannot be served</h1><p>${esc(message)}</p>
<p class="muted">Nothing was sent back to the application. Go back to it and try again, or tell its developer.</p>
</main></body></html>`;
}
