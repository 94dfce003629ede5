import path from 'node:path';
import type { Config } from '../../config.ts';
import { FsObjectStore } from './fs.ts';
import type { ObjectStore } from './object-store.ts';

/**
 * The configured store: S3 when `S3_ENDPOINT` is set, else a folder in `DATA_DIR/storage`. The AWS SDK
 * (~0.3 s of CPU to load) is loaded only for S3.
 */
export async function createObjectStore(config: Config): Promise<ObjectStore> {
  if (config.S3_ENDPOINT) {
    const { S3ObjectStore } = await import('./s3.ts');
    return new S3ObjectStore({
      endpoint: config.S3_ENDPOINT,
      sslEnabled: config.S3_SSL_ENABLED,
      bucket: config.S3_BUCKET,
      region: config.S3_REGION,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
    });
  }
  return new FsObjectStore(path.join(config.DATA_DIR, 'storage'));
}
