// The switchyard console: polls the controller's public read endpoints and sends
// changes with the operator's bearer token. The token lives in sessionStorage (this tab
// only, gone when it closes) and travels only in the Authorization header, never in a
// URL. Names, reasons and labels come from policies nobody here wrote, so they are only
// ever set as text, never parsed as HTML.

const POLL_MS = 2000;
const TOKEN_KEY = 'switchyard-token';
const DECISIONS = 200; // recent decisions fetched and filtered here
const JOBS = 200; // active jobs fetched, the oldest first
const ACTIONS_SHOWN = 6; // per decision row; the rest are counted
const CHART_POINTS = 3600;

const $ = (id) => document.getElementById(id);
const token = () => sessionStorage.getItem(TOKEN_KEY);
const secs = (t) => (t == null ? '—' : Math.round(t).toLocaleString('en'));
const pct = (x) => (x == null ? '—' : `${(x * 100).toFixed(0)}%`);
// A difference with its sign; one that rounds to 0 has none.
const signed = (t) => {
  const shown = Math.round(Math.abs(t));
  return `${shown && t > 0 ? '+' : shown && t < 0 ? '−' : ''}${secs(Math.abs(t))}`;
};
/** An estimate's 95% interval; an end the data do not reach yet is "open". */
const interval = (e, show = secs) => `95% CI ${e.low == null ? 'open' : show(e.low)} to ${e.high == null ? 'open' : show(e.high)}`;
/** An estimate for a table cell: the value, its interval on a line of its own. */
const estimate = (e) => [secs(e.value), h('div', { className: 'ci' }, interval(e))];

// Bidirectional controls (and other invisible format and control characters) in names
// and reasons from policies and workloads would reorder or hide what follows them: shown
// as `\u{202e}`, as the command line shows them.
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const visible = (text) => text.replace(INVISIBLE, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);

/** An element with properties and children (strings become text nodes). */
function h(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children.flat().filter((c) => c != null && c !== false)
    .map((c) => (typeof c === 'string' ? visible(c) : c)));
  return node;
}

/** Text with a line-break opportunity after each `:` and `/`, where a source breaks best. */
const breakable = (text) => text.split(/(?<=[:/])/).flatMap((part, i) => (i ? [h('wbr'), part] : [part]));

const state = { policies: null, shown: {}, chart: null, samples: [[], [], []], marks: [] };

// ---- talking to the controller -------------------------------------------------------

async function api(method, path, body) {
  const headers = {};
  if (method !== 'GET' && token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method, headers, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (response.status === 404 && method === 'GET') return null;
  if (!response.ok) {
    throw Object.assign(new Error(data.error || response.statusText), { status: response.status });
  }
  return data;
}

/** Sends a change; says what happened, or why not, in the page's live regions. */
async function act(method, path, body, describe) {
  $('feedback').textContent = '';
  $('error').textContent = '';
  try {
    const answer = await api(method, path, body);
    $('feedback').textContent = describe(answer);
  } catch (error) {
    if (error.status === 401) {
      setToken(null);
      $('error').textContent = `Refused (401 Unauthorized): ${error.message}. The token was forgotten; enter the right one to make changes.`;
    } else {
      $('error').textContent = `Refused (${error.status ?? 'no answer'}): ${error.message}`;
    }
  }
  await refresh();
}

// ---- the token -----------------------------------------------------------------------

function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  showMode();
}

function showMode() {
  const canAct = Boolean(token());
  for (const button of document.querySelectorAll('.act')) button.disabled = !canAct;
  $('forget').disabled = !canAct;
  $('mode').textContent = canAct
    ? 'Token set for this tab: changes are enabled. It is sent as a header, never in a URL, and forgotten when the tab closes.'
    : 'Read-only. Enter the API token (the contents of the controller\'s --token-file) to activate policies, set parameters and run experiments.';
  if (state.experiment !== undefined) $('experiment-stop').disabled = !canAct || !state.experiment;
  // A settings file that has an experiment section owns the experiment: the API refuses
  // to start or stop one (409), so the page offers neither and says where to change it.
  const pinned = Boolean(state.owned?.experiment);
  $('experiment-form').hidden = pinned;
  const why = pinned ? `The settings file ${state.owned.file} sets the experiment (its experiment section): start, replace or stop it there; the API refuses to from here (409).` : '';
  if ($('experiment-owned').textContent !== why) $('experiment-owned').textContent = why;
}

$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const value = $('token').value.trim();
  $('token').value = '';
  setToken(value || null);
  $('error').textContent = '';
  $('feedback').textContent = value ? 'Token set; changes are enabled.' : 'No token entered; the console stays read-only.';
});
$('forget').addEventListener('click', () => {
  setToken(null);
  $('feedback').textContent = 'Token forgotten; the console is read-only.';
});

// ---- policies ------------------------------------------------------------------------

function renderPolicies(list) {
  const owned = state.owned;
  const key = JSON.stringify([list, owned]);
  if (state.shown.policies === key) return;
  state.shown.policies = key;
  state.policies = list;
  $('policies').tBodies[0].replaceChildren(...list.policies.map((p) => {
    const active = p.name === list.active;
    const params = Object.entries(p.settings).map(([k, v]) => h('li', {}, h('code', {}, `${k}=${v}`)));
    const activate = h('button', { type: 'button', className: 'act', textContent: 'Activate' });
    activate.setAttribute('aria-label', `Activate ${p.name}`);
    activate.addEventListener('click', () => act('POST', `/v1/policies/${encodeURIComponent(p.name)}/activate`, undefined,
      (a) => `${a.active} is active from round ${a.from_round}.`));
    return h('tr', { className: active ? 'active' : '' },
      h('th', { scope: 'row', title: p.summary, className: 'text' }, p.name, h('div', { className: 'note' }, p.version)),
      h('td', { className: 'mono', title: p.digest }, p.digest.replace('sha256:', '').slice(0, 12)),
      h('td', { className: 'text' }, breakable(p.source)),
      h('td', { className: 'text' }, params.length ? h('ul', { className: 'inline' }, params) : 'none'),
      h('td', {}, active ? h('strong', {}, 'active') : owned?.active ? h('span', { className: 'note' }, 'set by the settings file') : activate));
  }));
  $('policies-owned').textContent = owned?.active
    ? `The settings file ${owned.file} names the active policy: change it there (the API refuses activations with 409).` : '';
  const errors = list.load_errors.map((e) => h('li', {}, h('strong', {}, e.source), `: ${e.error}`));
  $('load-errors').replaceChildren(...(errors.length ? [h('h3', {}, 'Load errors: components refused'), h('ul', {}, errors)] : []));
  fillSelect($('params-policy'), list.policies.map((p) => p.name));
  fillSelect($('experiment-b'), list.policies.map((p) => p.name).filter((n) => n !== list.active));
  fillSelect($('filter-policy'), list.policies.map((p) => p.name), ['', 'any policy']);
  renderParameterFields();
  showMode();
}

/** Replaces a select's options, keeping the choice when it is still there. */
// Options are replaced only when the list changed: replacing them on every refresh
// would close a list the operator has open and take the option they are picking.
function fillSelect(select, names, first) {
  const wanted = [...(first ? [first] : []), ...names.map((n) => [n, n])];
  const current = [...select.options].map((o) => [o.value, o.textContent]);
  if (current.length === wanted.length && current.every(([v, t], i) => v === wanted[i][0] && t === wanted[i][1])) return;
  const chosen = select.value;
  select.replaceChildren(...wanted.map(([value, label]) => h('option', { value }, label)));
  if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
}

function renderParameterFields() {
  const policy = state.policies?.policies.find((p) => p.name === $('params-policy').value);
  const fields = (policy?.parameters ?? []).flatMap((param) => {
    const id = `param-${param.name}`;
    const input = h('input', { id, name: param.name, value: policy.settings[param.name] ?? param.default });
    input.setAttribute('aria-describedby', `${id}-doc`);
    return [h('label', { htmlFor: id }, param.name), input,
      h('p', { id: `${id}-doc`, className: 'note' }, `${param.doc} (default ${param.default})`)];
  });
  $('params-fields').replaceChildren(...(fields.length ? fields : [h('p', { className: 'note' }, 'This policy takes no parameters.')]));
  const pinned = Boolean(policy && state.owned?.parameters.includes(policy.name));
  $('params-submit').hidden = pinned;
  $('params-owned').textContent = pinned
    ? `The settings file ${state.owned.file} gives ${policy.name}'s parameters: change them there (the API refuses with 409).` : '';
}

$('params-policy').addEventListener('change', renderParameterFields);
$('params-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const name = $('params-policy').value;
  const values = Object.fromEntries([...$('params-fields').querySelectorAll('input')].map((i) => [i.name, i.value]));
  act('PUT', `/v1/policies/${encodeURIComponent(name)}/parameters`, values, (a) =>
    `${a.policy.name}'s parameters are set${a.applied ? `; they apply from round ${a.applied.from_round}` : ''}.`);
});

// ---- the experiment ------------------------------------------------------------------

function renderExperiment(report) {
  const running = Boolean(report);
  // The status region is announced when its text changes, so it is set only when what
  // runs changes (a split replacing a shadow run of the same policies counts).
  const described = running
    ? `A ${report.mode.mode} experiment runs: ${report.policy_a} (arm A, active) against ${report.policy_b} (arm B).`
    : 'No experiment is running.';
  if ($('experiment-state').textContent !== described) $('experiment-state').textContent = described;
  $('experiment-submit').textContent = running ? 'Replace the experiment' : 'Start experiment';
  state.experiment = report;
  $('arms').parentElement.hidden = !running;
  showMode();
  if (!running) { $('differences').replaceChildren(); renderComparison(null); return; }
  const head = $('arms').tHead.rows[0].cells;
  head[1].textContent = `Arm A: ${report.policy_a}`;
  head[2].textContent = `Arm B: ${report.policy_b}`;
  let rows;
  if (report.shadow) {
    const s = report.shadow;
    rows = [['Role', 'decides; applied', 'decides on the same snapshots; never applied'],
      ['Rounds', report.rounds, report.rounds],
      ['Failed rounds', '—', report.b_failures],
      ['Agreement', { span: s.agreement_rate == null ? 'no round compared yet' : `${pct(s.agreement_rate)}: the same operations in ${s.agreed} of ${s.compared} rounds` }]];
  } else {
    const [a, b] = report.split.arms;
    const row = (label, f) => [label, f(a), f(b)];
    // Completion counts the unfinished jobs at their age (censored): a mean over the
    // finished jobs alone would favour the arm that has finished least.
    const common = report.split.difference?.horizon;
    rows = [row('Jobs counted', (x) => x.jobs), row('Started', (x) => x.started),
      row('Finished', (x) => x.completion.finished), row('Still waiting or running', (x) => x.completion.unfinished),
      row('Median completion, Kaplan-Meier (s)', (x) => (x.completion.median
        ? estimate(x.completion.median) : 'not reached: half or more unfinished')),
      row(`Mean completion up to ${common == null ? "the arm's oldest job" : `${secs(common)} s`}, restricted (s)`,
        (x) => (x.completion.restricted_mean ? estimate(x.completion.restricted_mean) : '—')),
      row('Mean wait of started jobs (s)', (x) => secs(x.avg_wait)),
      row('CPU allocated', (x) => pct(x.cpu_allocated)),
      row('GPU allocated', (x) => pct(x.gpu_allocated)), ['Failed rounds', '—', report.b_failures]];
  }
  $('arms').tBodies[0].replaceChildren(...rows.map(([label, a, b]) => h('tr', {}, h('th', { scope: 'row' }, label),
    a?.span != null ? h('td', { colSpan: 2 }, a.span) : [a, b].map((x) => h('td', { className: 'num' }, [x].flat().map((c) => (c instanceof Node ? c : String(c))))))));
  renderComparison(report.split);
  const differing = (report.shadow?.differing ?? []).slice(-3).reverse();
  const items = differing.map((d) => h('li', {},
    `Round ${d.round} (t=${secs(d.time)} s): A ${describeOps(d.a)}; B ${describeOps(d.b)}`));
  $('differences').replaceChildren(...(items.length
    ? [h('h3', {}, 'The latest rounds in which B asked for something else'), h('ul', { className: 'compact' }, items)]
    : []));
}

/** A split's B-A difference and, when the arms' sizes differ beyond chance, a warning. */
function renderComparison(split) {
  const d = split?.difference;
  const difference = !split ? '' : d
    ? `B − A, mean completion up to ${secs(d.horizon)} s: ${signed(d.b_minus_a.value)} s (${interval(d.b_minus_a, signed)} s); `
      + (d.significant ? `B is ${d.b_minus_a.value < 0 ? 'faster' : 'slower'} beyond chance (the interval excludes 0).`
        : 'not significant (the interval includes 0).')
    : 'B − A: not yet, an arm has no job.';
  $('arm-difference').textContent = difference;
  const i = split?.imbalance;
  const balance = !i ? '' : `B has ${i.jobs_b} of ${i.jobs} jobs where the ratio expects ${i.expected_b.toFixed(1)}`
    + ` (p ${i.p_value < 0.0001 ? '< 0.0001' : `= ${i.p_value.toFixed(4)}`})`;
  // Set only on a change: the warning is a status region, announced when its text changes.
  const warning = i?.unbalanced ? `Unbalanced arms: ${balance}, beyond chance. The arms' figures compare different numbers of jobs than the ratio meant.` : '';
  if ($('imbalance').textContent !== warning) $('imbalance').textContent = warning;
  $('arm-balance').textContent = i && !i.unbalanced ? `Arm sizes: ${balance}, within chance.` : '';
}

$('experiment-mode').addEventListener('change', () => {
  for (const e of document.querySelectorAll('.split-only')) e.hidden = $('experiment-mode').value !== 'split';
});
$('experiment-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const mode = $('experiment-mode').value;
  // The button reads "Replace the experiment" while one runs: pressing it is the
  // operator's say-so, which the API asks for before it replaces a running experiment.
  const body = { mode, policy_b: $('experiment-b').value, replace: Boolean(state.experiment) };
  if (mode === 'split') body.ratio = Number($('experiment-ratio').value);
  act('POST', '/v1/experiment', body, (r) => `The ${mode} experiment started: ${r.policy_a} against ${r.policy_b}.`);
});
$('experiment-stop').addEventListener('click', () => act('DELETE', '/v1/experiment', undefined,
  (r) => `The experiment stopped after ${r.rounds} rounds.`));

// ---- utilisation ---------------------------------------------------------------------

// A mark's colour and dash on the chart, and its swatch in the list under it.
const MARK_STYLE = {
  policy: { color: '#6b2fb3', dash: [] },
  'experiment-start': { color: '#11582b', dash: [6, 3] },
  'experiment-stop': { color: '#a4161a', dash: [2, 3] },
};

function describeMark(m) {
  switch (m.kind) {
    case 'policy': return m.policy === m.previous
      ? `${m.policy} reloaded or given new parameters`
      : `${m.policy} decides (before: ${m.previous})`;
    case 'experiment-start': return `${m.mode} experiment starts: ${m.policy_a} (A) against ${m.policy_b} (B)`;
    case 'experiment-stop': return `experiment stops: ${m.policy_a} against ${m.policy_b}`;
    default: return m.kind;
  }
}

/** uPlot draw hook: each mark in the shown range as a vertical line, numbered as in the list. */
function drawMarks(u) {
  const { ctx } = u;
  const { top, height } = u.bbox;
  const ratio = window.devicePixelRatio || 1;
  const rows = []; // the right edge of the last label in each row, so labels never overlap
  ctx.save();
  ctx.font = `600 ${12 * ratio}px system-ui, sans-serif`;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  state.marks.forEach((m, i) => {
    if (m.time < u.scales.x.min || m.time > u.scales.x.max) return;
    const style = MARK_STYLE[m.kind] ?? MARK_STYLE.policy;
    const x = Math.round(u.valToPos(m.time, 'x', true));
    ctx.strokeStyle = style.color;
    ctx.lineWidth = 2 * ratio;
    ctx.setLineDash(style.dash.map((d) => d * ratio));
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    const label = String(i + 1);
    const w = ctx.measureText(label).width + 8 * ratio;
    const tall = 16 * ratio;
    let row = rows.findIndex((right) => x - w / 2 > right + 2 * ratio);
    if (row < 0) row = rows.length;
    rows[row] = x + w / 2;
    ctx.fillStyle = style.color;
    ctx.fillRect(x - w / 2, top + row * (tall + 2 * ratio), w, tall);
    ctx.fillStyle = '#fff';
    ctx.fillText(label, x, top + row * (tall + 2 * ratio) + tall / 2);
  });
  ctx.restore();
}

function renderMarks(marks) {
  const key = JSON.stringify(marks);
  if (state.shown.marks === key) return false;
  state.shown.marks = key;
  state.marks = marks;
  $('chart-marks').replaceChildren(...marks.map((m, i) => h('li', {},
    h('span', { className: `mark mark-${m.kind}` }, String(i + 1)),
    h('span', { className: `mark-line mark-${m.kind}`, ariaHidden: 'true' }),
    `t=${secs(m.time)} s: ${describeMark(m)}`)));
  $('chart-marks-heading').hidden = !marks.length;
  return true;
}

function renderUtilisation(answer) {
  const [time, cpu, gpu] = state.samples;
  // Two refreshes can overlap (a change refreshes at once): take only what is new.
  for (const s of answer.samples.filter((x) => !(x.time <= time.at(-1)))) {
    time.push(s.time); cpu.push(s.cpu * 100); gpu.push(s.gpu == null ? null : s.gpu * 100);
  }
  for (const series of state.samples) series.splice(0, Math.max(0, series.length - CHART_POINTS));
  const marked = renderMarks(answer.marks ?? []);
  const last = answer.samples.at(-1);
  if (last) {
    const gpus = answer.allocatable.gpus;
    $('chart-summary').textContent = `Share of the cluster requested by placed tasks over cluster time. Now (t=${secs(last.time)} s): CPU ${pct(last.cpu)} of ${answer.allocatable.cpu_millis / 1000} cores`
      + (gpus ? `, GPU ${pct(last.gpu)} of ${gpus} GPUs.` : '; the cluster has no GPUs.')
      + ` Peak CPU over the ${time.length} samples shown: ${Math.max(...cpu).toFixed(0)}%.`
      + (state.marks.length ? ` Numbered lines mark the ${state.marks.length} changes listed below.` : '');
  }
  if (!window.uPlot || time.length < 2) return;
  if (!state.chart) {
    state.chart = new window.uPlot({
      width: $('chart').clientWidth, height: 260, legend: { live: false },
      scales: { x: { time: false }, y: { range: [0, 100] } },
      axes: [{ label: 'cluster time (s)' }, { label: '% allocated' }],
      series: [{ label: 'time (s)' },
        { label: 'CPU', stroke: '#0b57d0', width: 2, value: (_, v) => (v == null ? '—' : `${v.toFixed(0)}%`) },
        { label: 'GPU', stroke: '#b35900', width: 2, dash: [8, 4], value: (_, v) => (v == null ? '—' : `${v.toFixed(0)}%`) }],
      hooks: { draw: [drawMarks] },
    }, state.samples, $('chart'));
    new ResizeObserver(() => state.chart.setSize({ width: $('chart').clientWidth, height: 260 })).observe($('chart'));
  } else if (answer.samples.length) {
    state.chart.setData(state.samples);
  } else if (marked) {
    state.chart.redraw(false);
  }
}

// ---- jobs ----------------------------------------------------------------------------

const PHASE_ORDER = { waiting: 0, restarting: 1, running: 2 };

function renderJobs(page) {
  const more = page.more ? ' Choose a phase to see the rest of it.' : '';
  $('jobs-count').textContent = `${page.jobs.length} of ${page.total} matching jobs shown (cluster time ${secs(page.time)} s).${more}`;
  // The queue first, then the rest; each in submission order (the sort is stable).
  const jobs = [...page.jobs].sort((a, b) => PHASE_ORDER[a.phase] - PHASE_ORDER[b.phase]);
  $('jobs').tBodies[0].replaceChildren(...jobs.map((j) => h('tr', {},
    h('th', { scope: 'row', className: 'text' }, j.id),
    h('td', {}, h('span', { className: `chip phase-${j.phase}` }, j.phase)),
    h('td', { className: 'num' }, secs(j.submit_time)),
    h('td', { className: 'num' }, secs((j.start_time ?? page.time) - j.submit_time) + (j.start_time == null ? ' so far' : '')),
    h('td', { className: 'num' }, `${j.placed} of ${j.tasks}`),
    h('td', { className: 'text' }, j.nodes.join(', ') || '—'),
    h('td', {}, j.arm ? j.arm.toUpperCase() : '—'),
    h('td', { className: 'text' }, Object.entries(j.policy_labels).map(([k, v]) => h('span', { className: 'chip' }, `${k}=${v}`)),
      Object.keys(j.policy_labels).length ? h('div', { className: 'note' }, `set by ${j.labels_by ?? 'a policy'}`) : '—'))));
}
$('jobs-phase').addEventListener('change', () => refresh());

// ---- decisions -----------------------------------------------------------------------

function describeOp(a) {
  switch (a.op) {
    case 'place': return `place ${a.job} on ${[...new Set(a.assignments.map((x) => x.node))].join(', ')}`;
    case 'migrate': return `migrate ${a.job}${a.task ? `/${a.task}` : ''} to ${a.node}${a.purpose ? ` (${a.purpose})` : ''}`;
    case 'set-cpu-weight': return `set ${a.job}/${a.task} CPU weight ${a.weight.toFixed(2)}`;
    case 'scale': return `scale ${a.job} to ${a.replicas} replicas`;
    default: return `${a.op} ${a.job}`;
  }
}
const describeTrigger = (t) => ({ 'job-arrived': `${t.name} arrived`, 'job-finished': `${t.name} finished`,
  'node-changed': `${t.name} changed` })[t.kind] ?? t.kind;
const describeOps = (ops) => (ops.length ? ops.map(describeOp).join(', ') : 'nothing');

// One arm's actions, rejections and labels as list items; in a split each item names its
// arm (`A:`, `B:`), so arm B's decisions read beside arm A's.
// While the decisions are filtered by a job, what concerns it comes first, so the few
// items shown say why the row matched.
function armItems(arm, tag) {
  const job = $('filter-job').value.trim();
  const first = (list, jobOf) => (job ? [...list].sort((x, y) => jobOf(y).includes(job) - jobOf(x).includes(job)) : list);
  const actions = first([...arm.accepted.map((a) => [a, '']), ...(arm.rejected ?? []).map((a) => [a, 'rejected'])],
    ([a]) => a.job ?? '');
  const items = actions.slice(0, ACTIONS_SHOWN).map(([a, how]) => h('li', { className: how },
    h('strong', {}, `${tag}${how ? `rejected: ${describeOp(a)}` : describeOp(a)}`), `: ${how ? a.rejected_because : a.reason}`));
  if (actions.length > ACTIONS_SHOWN) items.push(h('li', {}, `${tag}and ${actions.length - ACTIONS_SHOWN} more`));
  const labels = first(arm.labels ?? [], (l) => l.job).map((l) => `${l.job}: ${l.key}=${l.value}`);
  if (labels.length) items.push(h('li', {}, `${tag}labels ${labels.slice(0, ACTIONS_SHOWN).join(', ')}${labels.length > ACTIONS_SHOWN ? ' …' : ''}`));
  return items;
}

function decisionRow(d) {
  const items = d.arm_b ? [...armItems(d, 'A: '), ...armItems(d.arm_b, 'B: ')] : armItems(d, '');
  const shadow = d.shadow && h('div', { className: d.shadow.agrees ? 'agree' : 'differ' },
    `shadow ${d.shadow.policy}: ${d.shadow.agrees == null ? 'not compared' : d.shadow.agrees ? 'agrees' : `differs (${describeOps(d.shadow.actions)})`}`);
  return h('tr', {},
    h('th', { scope: 'row', className: 'num' }, d.round),
    h('td', { className: 'num' }, secs(d.time), h('div', { className: 'note' }, d.triggers.map(describeTrigger).join(', '))),
    h('td', {}, d.policy, d.failure ? h('div', { className: 'rejected' }, `failed: ${d.failure}`) : null,
      d.arm_b ? h('div', {}, `arm B: ${d.arm_b.policy}`, d.arm_b.failure ? h('div', { className: 'rejected' }, `failed: ${d.arm_b.failure}`) : null) : null),
    h('td', {}, items.length ? h('ul', {}, items) : 'no action', shadow));
}

function mentions(d, job) {
  const arms = [d, d.arm_b].filter(Boolean);
  const jobs = [...arms.flatMap((a) => [...a.accepted, ...(a.rejected ?? []), ...(a.labels ?? [])].map((x) => x.job)),
    ...(d.shadow?.actions ?? []).map((a) => a.job), ...d.triggers.map((t) => t.name)];
  return jobs.some((j) => j && j.includes(job));
}

function renderDecisions(answer) {
  if (answer) state.decisions = answer.decisions;
  const all = state.decisions ?? [];
  const job = $('filter-job').value.trim();
  const policy = $('filter-policy').value;
  const shown = all.filter((d) => (!job || mentions(d, job))
    && (!policy || [d.policy, d.shadow?.policy, d.arm_b?.policy].includes(policy))).reverse();
  $('decisions-count').textContent = `${shown.length} of the ${all.length} most recent decisions shown`
    + (job || policy ? ` (filtered by ${[job && `job “${job}”`, policy && `policy ${policy}`].filter(Boolean).join(' and ')}).` : '.');
  $('decisions').tBodies[0].replaceChildren(...shown.map(decisionRow));
}
$('filter-job').addEventListener('input', () => renderDecisions());
$('filter-policy').addEventListener('change', () => renderDecisions());
for (const form of ['jobs-filter', 'decisions-filter']) $(form).addEventListener('submit', (e) => e.preventDefault());

// ---- the loop ------------------------------------------------------------------------

function renderStatus(s) {
  state.owned = s.owned_by_settings;
  const snap = s.snapshot;
  $('summary').textContent = `Active policy ${s.active} · cluster time ${secs(snap.time)} s · round ${s.rounds}`
    + ` (${s.failures} decided by the fallback) · jobs: ${snap.waiting} waiting, ${snap.running} running, ${snap.finished} finished`
    + (s.leading ? '' : ` · this replica follows ${s.leader ?? 'an unknown leader'}: changes go to the leader`);
}

async function refresh() {
  try {
    const phase = $('jobs-phase').value;
    const since = state.samples[0].at(-1);
    const [status, policies, experiment, utilisation, jobs, decisions] = await Promise.all([
      api('GET', '/v1/status'), api('GET', '/v1/policies'), api('GET', '/v1/experiment'),
      api('GET', `/v1/utilisation${since == null ? '' : `?since=${since}`}`),
      api('GET', `/v1/jobs?limit=${JOBS}${phase ? `&phase=${phase}` : ''}`),
      api('GET', `/v1/decisions?limit=${DECISIONS}`)]);
    renderStatus(status);
    renderPolicies(policies);
    renderExperiment(experiment);
    renderUtilisation(utilisation);
    renderJobs(jobs);
    renderDecisions(decisions);
    $('connection').textContent = '';
  } catch (error) {
    $('connection').textContent = `Cannot read the controller (${error.message}); trying again every ${POLL_MS / 1000} s.`;
  }
}

async function loop() {
  if (!document.hidden) await refresh();
  setTimeout(loop, POLL_MS);
}

showMode();
loop();
