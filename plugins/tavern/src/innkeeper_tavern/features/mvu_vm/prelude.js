// The environment of a card-declared MVU command processor
// (docs/mvu.md#command-processors-declared-by-cards). Evaluated once per VM before the card's
// declaration. It gives the declaration only what docs/contract/mvu-vm.md#command-processors
// names: eventOn, eventMakeLast, waitGlobalInitialized('Mvu'), Mvu.events.COMMAND_PARSED, the
// operation gate and a small lodash subset (_.remove, _.filter, _.get ...: docs/mvu.md). There
// is no DOM, module import, network, file, timer or host function.
'use strict';
(function () {
  const COMMAND_PARSED = 'mag_command_parsed';
  const INITIALIZED = 'global_Mvu_initialized';
  const listeners = new Map();
  const waiters = [];
  const state = { initialized: false, async: false, gate: null };

  function isAsync(fn) {
    const tag = fn[Symbol.toStringTag];
    return tag === 'AsyncFunction' || tag === 'AsyncGeneratorFunction';
  }
  function list(name) {
    let found = listeners.get(name);
    if (found === undefined) {
      found = [];
      listeners.set(name, found);
    }
    return found;
  }
  function checked(name, fn) {
    if (typeof name !== 'string') throw new TypeError('an event name is a string');
    if (typeof fn !== 'function') throw new TypeError('a listener is a function');
    if (isAsync(fn) && name === COMMAND_PARSED) {
      state.async = true;
      throw new TypeError('async COMMAND_PARSED listeners are rejected');
    }
  }
  function remove(name, fn) {
    const found = list(name);
    const at = found.indexOf(fn);
    if (at >= 0) found.splice(at, 1);
  }
  function eventOn(name, fn) {
    checked(name, fn);
    if (name === INITIALIZED && state.initialized) {
      fn();
    } else if (!list(name).includes(fn)) {
      list(name).push(fn);
    }
    return { stop: () => remove(name, fn) };
  }
  function eventMakeLast(name, fn) {
    checked(name, fn);
    remove(name, fn);
    list(name).push(fn);
    return { stop: () => remove(name, fn) };
  }
  function eventOnce(name, fn) {
    checked(name, fn);
    const once = function (...args) {
      remove(name, once);
      return fn(...args);
    };
    list(name).push(once);
    return { stop: () => remove(name, once) };
  }
  function waitGlobalInitialized(name) {
    if (name !== 'Mvu') return Promise.reject(new Error('only Mvu is available here'));
    if (state.initialized) return Promise.resolve();
    return new Promise((resolve) => waiters.push(resolve));
  }
  function freeze(value) {
    if (value !== null && typeof value === 'object') {
      for (const key of Object.keys(value)) freeze(value[key]);
      Object.freeze(value);
    }
    return value;
  }
  const noop = function () {};
  // The lodash functions card listeners use on the command list (a local subset, not lodash).
  function iteratee(fn) {
    if (typeof fn === 'function') return fn;
    if (typeof fn === 'string') return (value) => (value == null ? undefined : value[fn]);
    if (fn !== null && typeof fn === 'object') {
      const wanted = fn;
      return (value) => value != null && Object.keys(wanted).every((k) => isEqual(value[k], wanted[k]));
    }
    return (value) => value;
  }
  function pathOf(path) {
    return Array.isArray(path) ? path.map(String) : String(path).match(/[^.[\]]+/g) || [];
  }
  function get(obj, path, fallback) {
    let value = obj;
    for (const key of pathOf(path)) {
      if (value == null || key === '__proto__' || key === 'constructor') return fallback;
      value = value[key];
    }
    return value === undefined ? fallback : value;
  }
  function isEqual(a, b) {
    return JSON.stringify(a) === JSON.stringify(b);
  }
  function removeWhere(list, fn) {
    const test = iteratee(fn);
    const removed = [];
    for (let i = 0; i < list.length; ) {
      if (test(list[i], i, list)) removed.push(list.splice(i, 1)[0]);
      else i += 1;
    }
    return removed;
  }
  const lodash = Object.freeze({
    remove: removeWhere,
    get,
    has: (obj, path) => get(obj, path, undefined) !== undefined,
    isEqual,
    cloneDeep: (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value))),
    filter: (list, fn) => (Array.isArray(list) ? list.filter(iteratee(fn)) : []),
    map: (list, fn) => (Array.isArray(list) ? list.map(iteratee(fn)) : []),
    find: (list, fn) => (Array.isArray(list) ? list.find(iteratee(fn)) : undefined),
    findIndex: (list, fn) => (Array.isArray(list) ? list.findIndex(iteratee(fn)) : -1),
    some: (list, fn) => (Array.isArray(list) ? list.some(iteratee(fn)) : false),
    every: (list, fn) => (Array.isArray(list) ? list.every(iteratee(fn)) : true),
    includes: (coll, value) =>
      typeof coll === 'string' ? coll.includes(value) : Object.values(coll || {}).includes(value),
    isString: (v) => typeof v === 'string',
    isNumber: (v) => typeof v === 'number',
    isArray: Array.isArray,
    isEmpty: (v) => v == null || (typeof v === 'object' ? Object.keys(v).length === 0 : !v.length),
    trim: (v) => String(v).trim(),
    startsWith: (v, prefix) => String(v).startsWith(prefix),
    endsWith: (v, suffix) => String(v).endsWith(suffix),
  });
  const Mvu = Object.freeze({
    events: Object.freeze({
      VARIABLE_INITIALIZED: 'mag_variable_initiailized',
      VARIABLE_UPDATE_STARTED: 'mag_variable_update_started',
      COMMAND_PARSED: COMMAND_PARSED,
      VARIABLE_UPDATE_ENDED: 'mag_variable_update_ended',
      SINGLE_VARIABLE_UPDATED: 'mag_variable_updated',
    }),
    getOperationGate: () => state.gate,
  });
  Object.defineProperties(globalThis, {
    Mvu: { value: Mvu },
    eventOn: { value: eventOn },
    eventMakeLast: { value: eventMakeLast },
    eventOnce: { value: eventOnce },
    eventRemoveListener: { value: remove },
    waitGlobalInitialized: { value: waitGlobalInitialized },
    console: { value: Object.freeze({ log: noop, info: noop, warn: noop, error: noop, debug: noop }) },
    _: { value: lodash },
  });
  const host = {
    // The initialization: COMMAND_PARSED listeners registered by now are the processor's.
    initialize() {
      state.initialized = true;
      for (const resolve of waiters.splice(0)) resolve();
      for (const fn of list(INITIALIZED).splice(0)) fn();
    },
    listenerCount: () => list(COMMAND_PARSED).length,
    rejectedAsync: () => state.async,
    // One COMMAND_PARSED dispatch: listeners in order, on private copies; the command views
    // after them, as JSON.
    dispatch(variablesJson, commandsJson, messageContent, gateJson) {
      const variables = JSON.parse(variablesJson);
      const commands = JSON.parse(commandsJson);
      state.gate = gateJson === null ? null : freeze(JSON.parse(gateJson));
      try {
        for (const fn of list(COMMAND_PARSED).slice()) {
          const result = fn(variables, commands, messageContent);
          if (result !== null && (typeof result === 'object' || typeof result === 'function') &&
              typeof result.then === 'function') {
            state.async = true;
            throw new TypeError('a COMMAND_PARSED listener returned a promise');
          }
        }
      } finally {
        state.gate = null;
      }
      if (!Array.isArray(commands)) throw new TypeError('commands is no longer an array');
      return JSON.stringify(commands.map((c) => (c !== null && typeof c === 'object'
        ? { type: c.type, args: c.args, full_match: c.full_match, reason: c.reason }
        : c)));
    },
  };
  Object.defineProperty(globalThis, '__innkeeperMvu', { value: Object.freeze(host) });
})();
