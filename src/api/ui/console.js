/*
 * csid web console. Reads the server's JSON API (docs/server-api.md) from
 * the same origin: volumes, nodes, plugins and snapshots as lists, the
 * event stream (newline-delimited JSON read with fetch, so the token can
 * travel in a header), /v1/status/health every few seconds for the
 * summary bar and /v1/status/reconciler (the server's samples of the
 * queue over the last 10 minutes) for the chart. A change event
 * refreshes the list it concerns.
 *
 * The ACL token lives in sessionStorage only and goes out in the
 * X-Csid-Token header: never in a URL, a cookie or the page. Any 403 on a
 * read shows the sign-in form instead of data.
 *
 * Everything the server says is put in the page as text (textContent and
 * text nodes through el()); no string is ever parsed as HTML, so a volume
 * named "<script>" shows as those characters.
 *
 * The two actions (delete a volume, detach every claim of a node) call the
 * API endpoints csictl uses, after a dialog in which the operator types
 * the volume's or node's ID.
 */
'use strict';

(function () {
	const TOKEN_KEY = 'csid.token';
	const HEALTH_EVERY_MS = 2000;
	const HISTORY_EVERY_MS = 5000;
	const CHART_SPAN_MS = 10 * 60 * 1000;
	const REFRESH_EVERY_MS = 30000;
	const RELOAD_MIN_MS = 1000;
	const EVENTS_MAX = 200;
	const PAGE = 1000;
	const PAGES_MAX = 20;

	const $ = (id) => document.getElementById(id);

	/* An element with attributes and children; strings become text nodes. */
	function el(tag, attrs, ...kids) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (v === undefined || v === null || v === false)
				continue;
			if (k === 'class')
				e.className = v;
			else if (k === 'text')
				e.textContent = String(v);
			else
				e.setAttribute(k, String(v));
		}
		for (const kid of kids) {
			if (kid === undefined || kid === null || kid === false)
				continue;
			e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
		}
		return e;
	}

	function svg(tag, attrs, text) {
		const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
		for (const [k, v] of Object.entries(attrs))
			e.setAttribute(k, String(v));
		if (text !== undefined)
			e.textContent = String(text);
		return e;
	}

	function bytes(n) {
		if (!n)
			return '–';
		const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
		let i = 0;
		while (n >= 1024 && i < units.length - 1) {
			n /= 1024;
			i++;
		}
		return (n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)) + ' ' + units[i];
	}

	function clock(ms) {
		return new Date(ms).toLocaleTimeString([], {hour12: false});
	}

	function pill(state) {
		const good = ['ready', 'healthy', 'claimed', 'published', 'freed', 'schedulable'];
		const busy = ['creating', 'registering', 'deleting', 'node-unpublished',
			      'controller-unpublished', 'publishing', 'unpublishing'];
		const bad = ['failed', 'down', 'unhealthy', 'unschedulable', 'delete'];
		let cls = 'pill';
		if (good.includes(state))
			cls += ' ok';
		else if (busy.includes(state))
			cls += ' warn';
		else if (bad.includes(state))
			cls += ' bad';
		return el('span', {class: cls}, state || '?');
	}

	/* --- session and API --- */

	let session = null; /* {abort: AbortController} while signed in (or no ACL) */

	class ApiError extends Error {
		constructor(status, msg, code) {
			super(msg);
			this.status = status;
			this.code = code;
		}
	}

	function token() {
		return sessionStorage.getItem(TOKEN_KEY);
	}

	function headers(extra) {
		const h = Object.assign({Accept: 'application/json'}, extra || {});
		const t = token();
		if (t)
			h['X-Csid-Token'] = t;
		return h;
	}

	async function api(method, path, body) {
		const init = {method, headers: headers(), cache: 'no-store', credentials: 'omit',
			      redirect: 'error', signal: session ? session.abort.signal : undefined};
		if (body !== undefined) {
			init.headers['Content-Type'] = 'application/json';
			init.body = JSON.stringify(body);
		}
		const r = await fetch(path, init);
		let doc = null;
		try {
			doc = await r.json();
		} catch (e) {
			doc = null;
		}
		if (!r.ok) {
			const err = new ApiError(r.status, (doc && doc.error) || r.statusText,
						 doc && doc.code);
			if (r.status === 403 && method === 'GET')
				signOut(token() ? 'The token was refused: ' + err.message : '');
			throw err;
		}
		return doc;
	}

	/*
	 * Every page of a list (per_page PAGE), at most PAGES_MAX pages: the
	 * result's `more` is true when the list goes on past them.
	 */
	async function list(path, key) {
		const out = [];
		let next = null;
		for (let i = 0; i < PAGES_MAX; i++) {
			let q = path + '?per_page=' + PAGE;
			if (next)
				q += '&next_token=' + encodeURIComponent(next);
			const doc = await api('GET', q);
			out.push(...(doc[key] || []));
			next = doc.next_token;
			if (!next)
				break;
		}
		out.more = !!next;
		return out;
	}

	function count(id, items) {
		$(id).textContent = items.more ? 'first ' + items.length : String(items.length);
	}

	/* --- state and rendering --- */

	const state = {volumes: [], nodes: [], plugins: [], snapshots: [], samples: [], live: null};

	function emptyRow(tbody, cols, text) {
		tbody.replaceChildren(el('tr', {}, el('td', {class: 'empty', colspan: cols}, text)));
	}

	function renderVolumes() {
		const tbody = $('volumes').tBodies[0];
		const f = $('filter').value.trim().toLowerCase();
		const rows = [];
		for (const v of state.volumes) {
			const hay = [v.id, v.name, v.plugin_id, v.state,
				     ...(v.claims || []).map((c) => c.node_id + ' ' + c.alloc_id)]
					.join(' ').toLowerCase();
			if (f && !hay.includes(f))
				continue;
			rows.push(volumeRow(v));
		}
		count('volume-count', state.volumes);
		if (!rows.length)
			emptyRow(tbody, 6, state.volumes.length ? 'no volume matches' : 'no volumes');
		else
			tbody.replaceChildren(...rows);
	}

	function volumeRow(v) {
		const id = el('td', {}, el('strong', {class: 'mono vol-id'}, v.id));
		if (v.name && v.name !== v.id)
			id.append(el('span', {class: 'sub vol-name'}, v.name));
		id.append(el('span', {class: 'sub'}, v.plugin_id));

		const st = el('td', {}, pill(v.state));
		const problem = v.failure || (v.status && v.status.last_error);
		if (problem)
			st.append(el('span', {class: 'error-text'}, problem +
				     (v.status && v.status.attempts ? ' (attempt ' + v.status.attempts + ')' : '')));

		const claims = el('td', {class: 'claims'});
		for (const c of v.claims || []) {
			claims.append(el('span', {class: 'claim', 'data-alloc': c.alloc_id},
					 el('span', {class: 'mono'}, c.alloc_id), ' on ',
					 el('span', {class: 'mono'}, c.node_id), ' · ', c.mode, ' ',
					 pill(c.state),
					 c.note ? el('span', {class: 'sub'}, c.note) : null));
		}
		if (!(v.claims || []).length)
			claims.append(el('span', {class: 'sub'}, 'unclaimed'));

		const health = el('td', {},
				  pill(v.schedulable ? 'schedulable' : 'unschedulable'),
				  v.plugin_health && v.plugin_health !== 'healthy' ?
					  el('span', {class: 'sub'}, 'plugin ' + v.plugin_health) : null);

		const del = el('button', {class: 'small', type: 'button'}, 'Delete');
		del.addEventListener('click', () => confirmDelete(v));

		return el('tr', {'data-volume': v.id}, id, st,
			  el('td', {}, bytes(v.capacity),
			     !v.capacity && v.capacity_min ?
				     el('span', {class: 'sub'}, 'asks ' + bytes(v.capacity_min)) : null),
			  claims, health,
			  el('td', {class: 'actions'}, del));
	}

	/* Volumes with a claim (not yet freed) on node. */
	function volumesOnNode(node) {
		return state.volumes.filter((v) => (v.claims || []).some((c) => c.node_id === node));
	}

	function renderNodes() {
		const tbody = $('nodes').tBodies[0];
		$('node-count').textContent = String(state.nodes.length);
		if (!state.nodes.length)
			return emptyRow(tbody, 5, 'no nodes');
		tbody.replaceChildren(...state.nodes.map((n) => {
			const plugins = el('td', {});
			for (const p of n.plugins || [])
				plugins.append(el('span', {class: 'plugin-line'},
						  pill(p.healthy && n.status !== 'down' ? 'healthy' : 'unhealthy'), ' ',
						  el('span', {class: 'mono'}, p.plugin_id), ' ',
						  el('span', {class: 'kind'}, p.type),
						  p.health && !p.healthy ? el('span', {class: 'sub'}, p.health) : null));
			const vols = volumesOnNode(n.id);
			const detach = el('button', {class: 'small', type: 'button',
						     disabled: vols.length === 0}, 'Detach claims');
			detach.addEventListener('click', () => confirmDetach(n.id));
			return el('tr', {'data-node': n.id},
				  el('td', {}, el('strong', {class: 'mono'}, n.id),
				     n.address ? el('span', {class: 'sub nowrap'}, n.address) : null,
				     n.instance_tag ? el('span', {class: 'sub'}, 'agent ' + n.instance_tag) : null),
				  el('td', {}, pill(n.status)), plugins,
				  el('td', {}, String(vols.length)), el('td', {class: 'actions'}, detach));
		}));
	}

	function renderPlugins() {
		const tbody = $('plugins').tBodies[0];
		$('plugin-count').textContent = String(state.plugins.length);
		if (!state.plugins.length)
			return emptyRow(tbody, 4, 'no plugins');
		const ratio = (x) => {
			const s = x.healthy + ' / ' + x.expected + ' healthy';
			return pill(x.expected && x.healthy < x.expected ? s.replace('healthy', 'unhealthy') : s);
		};
		tbody.replaceChildren(...state.plugins.map((p) => {
			const c = ratio(p.controllers);
			const n = ratio(p.nodes);
			c.className = 'pill ' + (p.controllers.healthy >= p.controllers.expected ? 'ok' : 'bad');
			n.className = 'pill ' + (p.nodes.healthy >= p.nodes.expected ? 'ok' : 'bad');
			return el('tr', {'data-plugin': p.id},
				  el('td', {}, el('strong', {class: 'mono'}, p.id),
				     el('span', {class: 'sub'}, p.controller_required ?
					'needs controller publish' : 'no controller publish')),
				  el('td', {}, c), el('td', {}, n),
				  el('td', {}, (p.versions || []).join(', ') || '–'));
		}));
	}

	function renderSnapshots() {
		const tbody = $('snapshots').tBodies[0];
		count('snapshot-count', state.snapshots);
		if (!state.snapshots.length)
			return emptyRow(tbody, 5, 'no snapshots');
		tbody.replaceChildren(...state.snapshots.map((s) => {
			const st = el('td', {}, pill(s.state));
			const problem = s.failure || (s.status && s.status.last_error);
			if (problem)
				st.append(el('span', {class: 'error-text'}, problem));
			return el('tr', {'data-snapshot': s.id},
				  el('td', {}, el('strong', {class: 'mono'}, s.id),
				     s.name && s.name !== s.id ? el('span', {class: 'sub'}, s.name) : null),
				  el('td', {class: 'mono'}, s.volume_id), st, el('td', {}, bytes(s.size_bytes)),
				  el('td', {}, s.creation_time_ms ? new Date(s.creation_time_ms).toLocaleString() : '–'));
		}));
	}

	function renderSummary(h) {
		const items = [
			['store ' + h.store + ' · index ' + h.index, false],
			['nodes ' + h.nodes.ready + ' ready' + (h.nodes.down ? ', ' + h.nodes.down + ' down' : ''),
			 h.nodes.down > 0],
			['reconciler ' + h.reconciler.queued + ' queued, ' + h.reconciler.failing + ' failing',
			 h.reconciler.failing > 0],
		];
		$('summary').replaceChildren(...items.map(([t, bad]) => el('li', {class: bad ? 'bad' : ''}, t)));
	}

	/* The reconciler chart: two polylines over the last CHART_SPAN_MS. */
	function renderChart() {
		/* Drawn at the box's own width, so the labels keep their size. */
		const now = Date.now();
		const pts = state.samples.filter((s) => s.t >= now - CHART_SPAN_MS && s.t <= now);
		if (state.live && (!pts.length || state.live.t > pts[pts.length - 1].t))
			pts.push(state.live);
		const top = Math.max(4, ...pts.map((s) => Math.max(s.queued, s.failing)));
		const ymax = Math.ceil(top / 4) * 4;
		/* The left margin fits the longest axis label. */
		const W = Math.max(280, $('chart').clientWidth || 360), H = 150, R = 8, T = 8, B = 20;
		const L = 14 + 6 * String(ymax).length;
		const x = (t) => L + (W - L - R) * (1 - (now - t) / CHART_SPAN_MS);
		const y = (v) => T + (H - T - B) * (1 - v / ymax);
		const s = svg('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img',
				      'aria-label': 'reconciler queue over the last 10 minutes'});
		for (let i = 0; i <= 4; i++) {
			const v = (ymax / 4) * i;
			s.append(svg('line', {class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
			s.append(svg('text', {class: 'axis', x: L - 5, y: y(v) + 3, 'text-anchor': 'end'}, v));
		}
		for (const [m, label] of [[10, '-10m'], [5, '-5m'], [0, 'now']])
			s.append(svg('text', {class: 'axis', x: x(now - m * 60000), y: H - 5,
					      'text-anchor': m === 10 ? 'start' : m === 0 ? 'end' : 'middle'}, label));
		for (const key of ['queued', 'failing']) {
			if (!pts.length)
				continue;
			const last = pts[pts.length - 1];
			s.append(svg('polyline', {class: key, points: pts.map((p) =>
				x(p.t).toFixed(1) + ',' + y(p[key]).toFixed(1)).join(' ')}));
			s.append(svg('circle', {class: key + ' dot', cx: x(last.t).toFixed(1),
						cy: y(last[key]).toFixed(1), r: 3}));
		}
		$('chart').replaceChildren(s);
		const last = pts[pts.length - 1];
		$('now-queued').textContent = last ? String(last.queued) : '–';
		$('now-failing').textContent = last ? String(last.failing) : '–';
	}

	/* --- refreshing --- */

	function report(err) {
		if (err && err.name === 'AbortError')
			return;
		if (err instanceof ApiError && err.status === 403)
			return;
		toast(String(err && err.message ? err.message : err), true);
	}

	const loaders = {
		volumes: async () => {
			state.volumes = await list('/v1/volumes', 'volumes');
			renderVolumes();
			renderNodes();
		},
		nodes: async () => {
			const [nodes, plugins] = await Promise.all([api('GET', '/v1/nodes'),
								    api('GET', '/v1/plugins')]);
			state.nodes = nodes.nodes || [];
			state.plugins = plugins.plugins || [];
			renderNodes();
			renderPlugins();
		},
		snapshots: async () => {
			state.snapshots = await list('/v1/snapshots', 'snapshots');
			renderSnapshots();
		},
	};
	const pending = new Set();
	let pendingTimer = null;
	let lastReload = 0;

	/*
	 * Reloads the named lists soon: once for a burst of events, and at most
	 * every RELOAD_MIN_MS, so a busy server's stream does not turn into a
	 * stream of list reads.
	 */
	function refreshSoon(...what) {
		for (const w of what)
			pending.add(w);
		if (pendingTimer)
			return;
		const wait = Math.max(250, lastReload + RELOAD_MIN_MS - Date.now());
		pendingTimer = setTimeout(() => {
			pendingTimer = null;
			lastReload = Date.now();
			const todo = [...pending];
			pending.clear();
			for (const w of todo)
				loaders[w]().catch(report);
		}, wait);
	}

	/* The summary bar, and the chart's newest point. */
	async function pollHealth() {
		const h = await api('GET', '/v1/status/health');
		state.live = {t: Date.now(), queued: h.reconciler.queued, failing: h.reconciler.failing};
		renderSummary(h);
		renderChart();
	}

	/* The server's samples of the queue over the last minutes (one per period_ms). */
	async function pollHistory() {
		const doc = await api('GET', '/v1/status/reconciler');
		const now = Date.now();
		state.samples = (doc.samples || []).map((x) => ({t: now - x.age_ms, queued: x.queued,
								   failing: x.failing}));
		renderChart();
	}

	/* --- the event stream --- */

	function eventText(ev) {
		const o = ev.object || {};
		switch (ev.topic) {
		case 'volume':
			return ev.type === 'delete' ? 'deleted' : 'state ' + o.state +
				(o.status && o.status.last_error ? ': ' + o.status.last_error : '');
		case 'claim':
			return 'on ' + o.node_id + (o.note ? ': ' + o.note : '');
		case 'node':
			return ev.type === 'delete' ? 'deleted' : 'status ' + o.status;
		case 'plugin':
			return o.type + ' on ' + o.node_id + (o.health ? ': ' + o.health : '');
		case 'snapshot':
			return ev.type === 'delete' ? 'deleted' : 'state ' + o.state;
		default:
			return '';
		}
	}

	function onEvent(ev) {
		const list = $('events');
		const first = list.firstElementChild;
		if (first && first.classList.contains('empty'))
			first.remove();
		list.prepend(el('li', {'data-topic': ev.topic, 'data-type': ev.type, 'data-key': ev.key},
				el('span', {class: 'when'}, clock(Date.now())),
				el('span', {}, pill(ev.type), ' ', ev.topic),
				el('span', {class: 'what'}, el('strong', {class: 'mono'}, ev.key), ' ',
				   eventText(ev))));
		while (list.children.length > EVENTS_MAX)
			list.lastElementChild.remove();
		if (ev.topic === 'volume' || ev.topic === 'claim')
			refreshSoon('volumes');
		else if (ev.topic === 'node' || ev.topic === 'plugin')
			refreshSoon('nodes');
		else if (ev.topic === 'snapshot')
			refreshSoon('snapshots', 'volumes');
	}

	function streamState(text, cls) {
		const s = $('stream-state');
		s.textContent = text;
		s.className = 'stream ' + cls;
	}

	/* Follows /v1/event/stream until the session ends, resuming after a break. */
	async function follow(sess) {
		let index = null;
		while (session === sess) {
			try {
				const r = await fetch('/v1/event/stream' + (index ? '?index=' + index : ''),
						      {headers: headers(), cache: 'no-store', credentials: 'omit',
						       signal: sess.abort.signal});
				if (r.status === 403) {
					signOut('');
					return;
				}
				if (r.status === 400) {
					/* Resumed too far back: the lists are reloaded, the stream starts now. */
					index = null;
					refreshSoon('volumes', 'nodes', 'snapshots');
					continue;
				}
				if (!r.ok)
					throw new Error('event stream: HTTP ' + r.status);
				streamState('live', 'live');
				const reader = r.body.getReader();
				const dec = new TextDecoder();
				let buf = '';
				for (;;) {
					const {value, done} = await reader.read();
					if (done)
						break;
					buf += dec.decode(value, {stream: true});
					let nl;
					while ((nl = buf.indexOf('\n')) >= 0) {
						const line = buf.slice(0, nl).trim();
						buf = buf.slice(nl + 1);
						if (!line)
							continue;
						let ev;
						try {
							ev = JSON.parse(line);
						} catch (e) {
							continue;
						}
						if (ev.index)
							index = ev.index;
						if (ev.topic)
							onEvent(ev);
						else if (ev.error)
							toast('event stream: ' + ev.error, true);
					}
				}
			} catch (e) {
				if (session !== sess)
					return;
			}
			streamState('reconnecting', 'down');
			await new Promise((res) => setTimeout(res, 2000));
		}
	}

	/* --- actions behind a confirmation --- */

	let confirmAction = null;

	function ask(title, text, items, word, verb, action) {
		$('confirm-title').textContent = title;
		$('confirm-text').textContent = text;
		$('confirm-list').replaceChildren(...items.map((t) => el('li', {class: 'mono'}, t)));
		$('confirm-word').textContent = word;
		$('confirm-input').value = '';
		$('confirm-ok').textContent = verb;
		$('confirm-ok').disabled = true;
		$('confirm-input').dataset.word = word;
		confirmAction = action;
		$('confirm').showModal();
		$('confirm-input').focus();
	}

	function confirmDelete(v) {
		const holders = (v.claims || []).map((c) => c.alloc_id + ' on ' + c.node_id + ' (' + c.state + ')');
		ask('Delete volume ' + v.id + '?',
		    'The plugin deletes the volume and its data (DeleteVolume), then the record goes. ' +
		    (holders.length ? 'It is claimed: the server refuses while these claims hold it.'
				    : 'It has no claims.'),
		    holders, v.id, 'Delete volume', async () => {
			    await api('DELETE', '/v1/volume/' + encodeURIComponent(v.id) + '/delete');
			    toast('Deleting volume ' + v.id);
			    refreshSoon('volumes');
		    });
	}

	function confirmDetach(node) {
		const vols = volumesOnNode(node);
		ask('Detach every claim of node ' + node + '?',
		    'Each claim of this node is released: the server unpublishes the volumes from the ' +
		    'node and frees them for other nodes. Do this only for a node that is gone; ' +
		    'workloads still running there lose their volumes.',
		    vols.map((v) => v.id), node, 'Detach ' + vols.length + ' volume' + (vols.length === 1 ? '' : 's'),
		    async () => {
			    const failed = [];
			    for (const v of vols) {
				    try {
					    await api('PUT', '/v1/volume/' + encodeURIComponent(v.id) + '/detach',
						      {node_id: node});
				    } catch (e) {
					    failed.push(v.id + ': ' + e.message);
				    }
			    }
			    refreshSoon('volumes');
			    if (failed.length)
				    throw new Error('detach failed for ' + failed.join('; '));
			    toast('Released the claims of node ' + node + ' on ' + vols.length + ' volume(s)');
		    });
	}

	let toastTimer = null;

	function toast(text, bad) {
		const t = $('toast');
		t.textContent = text;
		t.className = 'toast' + (bad ? ' bad' : '');
		t.hidden = false;
		clearTimeout(toastTimer);
		toastTimer = setTimeout(() => {
			t.hidden = true;
		}, bad ? 9000 : 4000);
	}

	/* --- sign in and out --- */

	let timers = [];

	function signOut(why) {
		if (session) {
			session.abort.abort();
			session = null;
		}
		for (const t of timers)
			clearInterval(t);
		timers = [];
		sessionStorage.removeItem(TOKEN_KEY);
		clearTimeout(pendingTimer);
		pendingTimer = null;
		pending.clear();
		/* No data stays in the page once signed out. */
		state.volumes = state.nodes = state.plugins = state.snapshots = state.samples = [];
		state.live = null;
		for (const id of ['volumes', 'nodes', 'plugins', 'snapshots'])
			$(id).tBodies[0].replaceChildren();
		$('chart').replaceChildren();
		$('app').hidden = true;
		$('logout').hidden = true;
		$('summary').replaceChildren();
		$('events').replaceChildren();
		streamState('signed out', 'down');
		$('login').hidden = false;
		$('login-error').textContent = why || '';
		$('token').value = '';
		$('token').focus();
	}

	async function start() {
		const sess = {abort: new AbortController()};
		session = sess;
		try {
			/* One read first: with ACL on and no good token this 403s into the sign-in form. */
			await loaders.volumes();
		} catch (e) {
			if (session === sess)
				report(e);
			if (!(e instanceof ApiError && e.status === 403) && session === sess)
				showApp();
			return;
		}
		showApp();
	}

	function showApp() {
		const sess = session;
		$('login').hidden = true;
		$('app').hidden = false;
		$('logout').hidden = !token();
		$('events').replaceChildren(el('li', {class: 'empty'}, 'waiting for changes…'));
		streamState('connecting', '');
		loaders.nodes().catch(report);
		loaders.snapshots().catch(report);
		pollHealth().catch(report);
		pollHistory().catch(report);
		renderChart();
		timers.push(setInterval(() => pollHealth().catch(report), HEALTH_EVERY_MS));
		timers.push(setInterval(() => pollHistory().catch(report), HISTORY_EVERY_MS));
		timers.push(setInterval(() => refreshSoon('volumes', 'nodes', 'snapshots'), REFRESH_EVERY_MS));
		follow(sess);
	}

	function init() {
		$('login-form').addEventListener('submit', (ev) => {
			ev.preventDefault();
			const t = $('token').value.trim();
			if (!t) {
				$('login-error').textContent = 'Enter a token.';
				return;
			}
			sessionStorage.setItem(TOKEN_KEY, t);
			$('token').value = '';
			$('login-error').textContent = '';
			start();
		});
		$('logout').addEventListener('click', () => signOut(''));
		$('filter').addEventListener('input', renderVolumes);
		window.addEventListener('resize', renderChart);
		$('confirm-input').addEventListener('input', () => {
			$('confirm-ok').disabled = $('confirm-input').value !== $('confirm-input').dataset.word;
		});
		$('confirm-cancel').addEventListener('click', () => $('confirm').close());
		$('confirm-ok').addEventListener('click', async () => {
			const action = confirmAction;
			$('confirm').close();
			confirmAction = null;
			if (!action)
				return;
			try {
				await action();
			} catch (e) {
				report(e);
			}
		});
		start();
	}

	if (document.readyState === 'loading')
		document.addEventListener('DOMContentLoaded', init);
	else
		init();
})();
