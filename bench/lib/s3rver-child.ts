/** Child process: an s3rver on 127.0.0.1:<argv[2]> storing in <argv[3]>, with bucket <argv[4]>. */
import S3rver from 's3rver';

const [port, dir, bucket] = process.argv.slice(2) as [string, string, string];
const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory: dir,
  silent: true,
  configureBuckets: [{ name: bucket }],
});
await server.run();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void server.close().then(() => process.exit(0));
});
