/**
 * The browsable API reference at `/docs`: Swagger UI (@fastify/swagger-ui) over the same document as
 * `GET /openapi.json`. Its scripts, styles and images are files of the package, served from here: the
 * page asks nothing of another origin (no CDN, and no call to Swagger's online validator).
 *
 * When it is served (API_REFERENCE_ENABLED): outside production by default; in production only when
 * turned on. The document it shows is public either way (`/openapi.json`); the setting only decides
 * whether a production service also serves a web page.
 */
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

const API_REFERENCE_PREFIX = '/docs';

/**
 * The API's own policy (security.ts) refuses every script and style, which would leave the page blank.
 * These routes alone run the package's own files: scripts and styles from this origin only, nothing
 * inline (Swagger UI styles its elements through the DOM, which the policy allows). It shows icons as
 * `data:` images and fetches the document from here.
 */
const API_REFERENCE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Registers `/docs` (the page), `/docs/static/*` (its files) and `/docs/json` and `/docs/yaml`. */
export async function registerApiReference(app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: API_REFERENCE_PREFIX,
    // The plugin sets this header in an onSend hook of its own routes only: every other answer keeps the
    // API's policy.
    staticCSP: API_REFERENCE_CSP,
    // No badge: it would send the document to validator.swagger.io to be checked.
    validatorUrl: false,
    uiConfig: {
      // Without Swagger UI's top bar: its box that loads any other document is of no use here.
      layout: 'BaseLayout',
      deepLinking: true,
      docExpansion: 'list',
      defaultModelsExpandDepth: 0,
      tryItOutEnabled: false,
    },
    theme: { title: 'Gatehouse API reference' },
  });
}
