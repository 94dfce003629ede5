/** Streaming upload and download helpers for the file scenarios (measured in the bench process). */
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** POSTs a file as multipart/form-data (part `file`), streamed; resolves with status and seconds taken. */
export function uploadMultipart(
  url: string,
  file: string,
  headers: Record<string, string>,
  contentType = 'application/octet-stream',
): Promise<{ status: number; seconds: number; body: string }> {
  const boundary = `----gatehouse-bench-${Date.now()}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="upload.bin"\r\nContent-Type: ${contentType}\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const length = head.length + statSync(file).size + tail.length;
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': String(length),
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          body += d;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            seconds: Number(process.hrtime.bigint() - started) / 1e9,
            body,
          }),
        );
      },
    );
    req.on('error', reject);
    req.write(head);
    const rs = createReadStream(file);
    rs.on('error', reject);
    rs.on('end', () => req.end(tail));
    rs.pipe(req, { end: false });
  });
}

/** GETs a URL and discards the body; resolves with status, bytes and seconds taken. */
export function download(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; bytes: number; seconds: number }> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        let bytes = 0;
        pipeline(
          res,
          new Writable({
            write(chunk: Buffer, _enc, cb) {
              bytes += chunk.length;
              cb();
            },
          }),
        )
          .then(() =>
            resolve({
              status: res.statusCode ?? 0,
              bytes,
              seconds: Number(process.hrtime.bigint() - started) / 1e9,
            }),
          )
          .catch(reject);
      })
      .on('error', reject);
  });
}
