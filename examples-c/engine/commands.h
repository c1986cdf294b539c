/*
 * commands.h: the engine calls memcached makes for one command (store, get, delete), checking
 * what the engine hands back on the way, and the check that an engine library's
 * create_instance speaks interface 1 only. Shared by the conformance programs: include it after
 * declaring the engine under test as `static ENGINE_HANDLE *H; static ENGINE_HANDLE_V1 *V;`,
 * and after check.h.
 */
#ifndef MCB_COMMANDS_H
#define MCB_COMMANDS_H

#include <dlfcn.h>
#include <string.h>

static ENGINE_ERROR_CODE store(mh_conn *c, const char *key, const char *val, uint32_t flags,
                               rel_time_t exptime, ENGINE_STORE_OPERATION op, uint64_t in_cas,
                               uint64_t *out_cas) {
    item *it = NULL;
    size_t n = strlen(val);
    ENGINE_ERROR_CODE rc = V->allocate(H, c, &it, key, strlen(key), n, (int)flags, exptime);
    if (rc != ENGINE_SUCCESS) {
        return rc;
    }
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    CHECK_EQ_INT(info.nvalue, 1);
    CHECK_EQ_INT(info.value[0].iov_len, n);
    memcpy(info.value[0].iov_base, val, n);
    V->item_set_cas(H, c, it, in_cas);
    uint64_t cas = 0;
    rc = V->store(H, c, it, &cas, op, 0);
    V->release(H, c, it);
    if (out_cas != NULL) {
        *out_cas = cas;
    }
    return rc;
}

static ENGINE_ERROR_CODE get(mh_conn *c, const char *key, char *buf, size_t buflen,
                             uint64_t *cas, uint32_t *flags) {
    item *it = NULL;
    ENGINE_ERROR_CODE rc = V->get(H, c, &it, key, (int)strlen(key), 0);
    if (rc != ENGINE_SUCCESS) {
        return rc;
    }
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    CHECK_EQ_INT(info.nkey, strlen(key));
    CHECK(memcmp(info.key, key, info.nkey) == 0);
    size_t n = info.value[0].iov_len < buflen - 1 ? info.value[0].iov_len : buflen - 1;
    memcpy(buf, info.value[0].iov_base, n);
    buf[n] = '\0';
    if (cas != NULL) {
        *cas = info.cas;
    }
    if (flags != NULL) {
        *flags = info.flags;
    }
    V->release(H, c, it);
    return rc;
}

static ENGINE_ERROR_CODE del(mh_conn *c, const char *key, uint64_t cas) {
#ifdef MCB_ENGINE_PU
    return V->remove(H, c, key, strlen(key), cas, 0);
#else
    uint64_t inout = cas;
    return V->remove(H, c, key, strlen(key), &inout, 0);
#endif
}


/* create_instance of the library at `path` refuses any interface but 1, creating nothing. */
static void check_only_interface_1(const char *path) {
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL);
    if (dl == NULL) {
        return;
    }
    void *sym = dlsym(dl, "create_instance");
    CHECK(sym != NULL);
    if (sym != NULL) {
        CREATE_INSTANCE create;
        memcpy(&create, &sym, sizeof(create));
        ENGINE_HANDLE *h = NULL;
        CHECK_EQ_INT(create(2, mh_get_server_api, &h), ENGINE_ENOTSUP);
        CHECK(h == NULL);
    }
    dlclose(dl);
}

#endif /* MCB_COMMANDS_H */
