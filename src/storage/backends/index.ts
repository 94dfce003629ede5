import path from 'node:path';
import type { Config } from '../../config.ts';
import { FsObjectStore } from './fs.ts';
import type { ObjectStore } from './object-store.ts';
import { S3ObjectStore } from './s3.ts';

/** The configured store: S3 when `S3_ENDPOINT` is set, else a folder in `DATA_DIR/storage`. */
export function createObjectStore(config: Config): ObjectStore {
  if (config.S3_ENDPOINT) {
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
