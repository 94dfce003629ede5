# Gatehouse container image. Build: docker build -t gatehouse .
# Not built by CI (the project's machines have no container engine); `docker-compose config` checks the
# compose file, and scripts/smoke-dist.ts runs the same `node dist/main.js` the image runs.

# Node 22 LTS, pinned to the release CI runs the suite on (.ci/run installs the same version from npm);
# package.json's engines name the supported lines (22 and 24).
ARG NODE_VERSION=22.23.3

# --- build: compile TypeScript, then keep only the production dependencies ---
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# --- runtime: compiled code, production dependencies, no compiler, not root ---
FROM node:${NODE_VERSION}-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/data \
    CUSTOM_DIR=/app/custom
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
# The image's own user (uid 1000, "node") owns only the folders Gatehouse writes: DATA_DIR (image cache,
# the local storage backend) and CUSTOM_DIR/keys (`gatehouse keys rotate` on a file key).
RUN mkdir -p /app/data /app/custom/keys && chown -R node:node /app/data /app/custom
USER node
EXPOSE 3000
# GET /health answers 204 while the process serves; readiness (database, object store) is /health/ready.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health').then(r=>process.exit(r.status===204?0:1),()=>process.exit(1))"]
# node runs as PID 1 and handles SIGTERM itself (PID 1 would ignore an unhandled one): it finishes the
# requests in flight and exits 0, within 25 s. `docker stop` waits 10 s by default before SIGKILL; the
# compose file allows 30 s.
CMD ["node", "dist/main.js"]
