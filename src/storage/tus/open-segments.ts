/**
 * The segment area of the configured backend (segments.ts): a folder beside the objects
 * (`DATA_DIR/uploads`), or the reserved prefix of the bucket.
 */
import path from 'node:path';
import type { Config } from '../../config.ts';
import type { ObjectStore } from '../backends/object-store.ts';
import type { S3ObjectStore } from '../backends/s3.ts';
import { FsSegments, type SegmentArea } from './segments.ts';

export async function openSegments(config: Config, objects: ObjectStore): Promise<SegmentArea> {
  if (objects.kind === 's3') {
    const { S3Segments } = await import('./segments-s3.ts');
    return new S3Segments(objects as S3ObjectStore);
  }
  const area = new FsSegments(path.join(config.DATA_DIR, 'uploads'));
  await area.init();
  return area;
}
