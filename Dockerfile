# review-mirror: build once, run `node` directly (npm does not forward signals to the process).
FROM node:26-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src src
COPY migrations migrations
COPY bench bench
RUN npm run build && npm prune --omit=dev

FROM node:26-slim
ENV NODE_ENV=production
ENV DATA_DIR=/data
ENV HTTP_PORT=8080
ENV ADMIN_PORT=9464
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The embedded database (used when DATABASE_URL is unset) lives on this volume.
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
# 8080 is the public webhook receiver; 9464 (health, metrics) must stay internal.
EXPOSE 8080 9464
# The probe asks the admin server where ADMIN_HOST binds it: that address, or the loopback for a
# wildcard (127.0.0.1 also for '::', whose socket takes IPv4 too: ::1 is missing where Docker
# disables IPv6). Polling 127.0.0.1 alone, a server bound to one address is never healthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["node", "-e", "const h=(process.env.ADMIN_HOST||'').trim()||'0.0.0.0',u=new URL('http://'+(h.includes(':')?'['+h+']':h)+':'+((process.env.ADMIN_PORT||'').trim()||9464)+'/healthz');if(u.hostname==='0.0.0.0'||u.hostname==='[::]')u.hostname='127.0.0.1';fetch(u).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["run"]
