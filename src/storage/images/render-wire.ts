/**
 * The frames of the direct channel between the service and a render process (a Unix domain socket in a
 * private 0700 folder, one connection per job): a 4-byte big-endian length, that many bytes of JSON,
 * then the raw bytes the JSON announces (`length`). No structured clone, no relay through the supervisor:
 * the source and the result are copied once into the socket and once out of it.
 */
import type { ErrorCode } from '../../errors.ts';
import type { FormatChoice, ImageParams } from './params.ts';
import type { OutputFormat, RenderLimits } from './pipeline.ts';

/** The longest JSON part of a frame; anything longer is a broken peer. */
export const MAX_HEADER = 64 * 1024;

/** What the service sends: the job, then `length` bytes of source, or none when `file` names it. */
export interface JobHeader {
  params: ImageParams;
  choice: FormatChoice;
  limits: RenderLimits;
  /** Bytes of source following the header (0 with `file`). */
  length: number;
  /** A data file of the fs store to open read-only, and the size its metadata gives. */
  file?: { path: string; size: number } | undefined;
}

/** What a render process answers; `done` is followed by `length` bytes of image. */
export type AnswerHeader =
  | { kind: 'done'; length: number; format: OutputFormat; width: number; height: number }
  | { kind: 'reroute' }
  /** The data file named by `file` is not there (or not that version): send the bytes instead. */
  | { kind: 'gone' }
  | { kind: 'failed'; code: ErrorCode; message: string };

/** A header and its payload as the buffers to write (the payload is not copied). */
export function frame(header: object, payload?: Uint8Array): Buffer[] {
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32BE(json.length);
  return payload && payload.length > 0
    ? [len, json, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)]
    : [len, json];
}

/**
 * Reads one frame from chunks as they arrive: `push` each chunk; it returns the header and the payload
 * (in one buffer allocated at its announced size) once both are complete. Throws on a malformed frame.
 */
export class FrameReader<H extends { length?: number }> {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private header: H | undefined;
  private payload: Buffer | undefined;
  private filled = 0;

  constructor(private readonly maxPayload: number) {}

  push(chunk: Buffer): { header: H; payload: Buffer } | undefined {
    if (this.header === undefined) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
      if (this.buffered < 4) return undefined;
      const head = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
      this.chunks = [head];
      const size = head.readUInt32BE(0);
      if (size > MAX_HEADER) throw new Error('render channel: header too long');
      if (head.length < 4 + size) return undefined;
      const header = JSON.parse(head.toString('utf8', 4, 4 + size)) as H;
      const length = header.length ?? 0;
      if (!Number.isSafeInteger(length) || length < 0 || length > this.maxPayload)
        throw new Error('render channel: bad payload length');
      this.header = header;
      this.payload = Buffer.allocUnsafe(length);
      this.chunks = [];
      chunk = head.subarray(4 + size);
    }
    const payload = this.payload as Buffer;
    if (this.filled + chunk.length > payload.length)
      throw new Error('render channel: more bytes than announced');
    chunk.copy(payload, this.filled);
    this.filled += chunk.length;
    if (this.filled < payload.length) return undefined;
    return { header: this.header, payload };
  }
}
