/**
 * Screenshots kept as documentation: rewritten only when the page changed, not when only its data did
 * (a port in a URL, an id), so that a test run leaves the repository as it was.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import sharp from 'sharp';

/** Share of pixels below which a new picture shows the same page as the old one, with other data. */
const SAME_PAGE = 0.03;

/** The share of pixels that differ between the PNG in `file` and `png` (1 when there is no comparable file). */
async function differingShare(file: string, png: Buffer): Promise<number> {
  if (!existsSync(file)) return 1;
  const raw = (b: Buffer) => sharp(b).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const [a, b] = await Promise.all([raw(readFileSync(file)), raw(png)]);
  if (a.info.width !== b.info.width || a.info.height !== b.info.height) return 1;
  let differing = 0;
  for (let i = 0; i < a.data.length; i += 3) {
    const d =
      Math.abs((a.data[i] as number) - (b.data[i] as number)) +
      Math.abs((a.data[i + 1] as number) - (b.data[i + 1] as number)) +
      Math.abs((a.data[i + 2] as number) - (b.data[i + 2] as number));
    if (d > 24) differing++;
  }
  return differing / (a.info.width * a.info.height);
}

/** Writes `png` to `file` unless the picture there shows the same page; UPDATE_SCREENSHOTS=1 always writes. */
export async function keepScreenshot(file: string, png: Buffer): Promise<void> {
  if (process.env['UPDATE_SCREENSHOTS'] !== '1' && (await differingShare(file, png)) < SAME_PAGE) return;
  writeFileSync(file, png);
}
