/**
 * Writes docs/errors.md from the error catalogue (src/errors.ts), as config-docs.ts writes the
 * configuration table of docs/configuration.md from src/config.ts. `--check` exits 1 when the file is out
 * of date; a test (test/foundation/errors-catalogue.test.ts) checks it too, and that the codes it lists
 * are the codes the service throws.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { ERRORS, type ErrorCode } from '../src/errors.ts';

const cell = (s: string) => s.replace(/\|/g, '\\|');

export function renderErrorsDoc(): string {
  const rows = (Object.keys(ERRORS) as ErrorCode[]).map((code) => {
    const spec: { status: number; message: string } = ERRORS[code];
    return `| \`${code}\` | ${spec.status} | ${cell(spec.message)} |`;
  });
  return `# Error codes

<!-- Generated from src/errors.ts by \`npm run docs\`; do not edit by hand. -->

Every error the service answers with has one body shape, HBP's plus a stable \`code\`:

\`\`\`json
{ "statusCode": 401, "error": "Unauthorized", "message": "Not logged in", "code": "UNAUTHENTICATED" }
\`\`\`

- \`code\` is stable: clients branch on it, never on \`message\`.
- \`message\` is the catalogue's text below, unless the error says more (a validation error names the
  field: \`"email" is required\`).
- A 5xx answer also carries \`requestId\`, the same as the \`x-request-id\` header, and never shows
  internals; a 503 tells when to come back with \`Retry-After\` where the service can know it.
- Errors of the framework (bad JSON, a wrong content type, an oversized body, a malformed request) are
  answered under the generic codes at the top of the table (\`INVALID_JSON\`, \`UNSUPPORTED_MEDIA_TYPE\`,
  \`PAYLOAD_TOO_LARGE\`, \`BAD_REQUEST\`…).

| Code | Status | Message |
|---|---|---|
${rows.join('\n')}
`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = new URL('../docs/errors.md', import.meta.url);
  const next = renderErrorsDoc();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(file, 'utf8');
    } catch {}
    if (next !== current) {
      process.stderr.write('docs/errors.md is out of date: run npm run docs\n');
      process.exit(1);
    }
  } else writeFileSync(file, next);
}
