/* api.h - the contract's reply codes, carried in every JSON envelope's "code".
 * Which lock or store outcome answers which code is outcome.h. */
#ifndef APP_API_H
#define APP_API_H

enum api_code {
    API_OK = 0,
    API_BAD_PARAM = 1001,
    API_NO_COUPON = 1002,
    API_SOLD_OUT = 1003,
    API_USER_LIMIT = 1004,
    API_LOCK_TIMEOUT = 1005,
    API_UNAVAILABLE = 1006,
    API_AUTH = 1007,
    API_ROUTE = 1008,
    API_TOO_LARGE = 1009,
    API_LEASE_LOST = 1010, /* the fence refused a holder whose lease ended: nothing applied */
    API_INTERNAL = 1500
};

#endif /* APP_API_H */
