/** Request bodies of the upload route: multipart/form-data as browsers and HBP's clients send it. */
import { randomBytes } from 'node:crypto';

export interface Part {
  name: string;
  filename?: string;
  type?: string;
  data: string | Buffer;
}

/** A multipart/form-data body and its content type; `boundary` fixed when a test needs to cut it. */
export function multipartBody(
  parts: Part[],
  boundary = `----gatehouse${randomBytes(8).toString('hex')}`,
): { payload: Buffer; headers: Record<string, string>; boundary: string } {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.type) head += `Content-Type: ${p.type}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`), Buffer.from(p.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return {
    payload: Buffer.concat(chunks),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    boundary,
  };
}
