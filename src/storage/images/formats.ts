/**
 * The output formats and their media types, in a module without sharp: the service's own process names
 * formats, and only the render processes load sharp.
 */
export type OutputFormat = 'jpeg' | 'png' | 'webp' | 'avif' | 'gif';

export const CONTENT_TYPES: Record<OutputFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  avif: 'image/avif',
  gif: 'image/gif',
};
